//===- ParDialect.td - the par dialect ---------------------*- tablegen -*-===//
#ifndef PAR_DIALECT_TD
#define PAR_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Par_Dialect : Dialect {
  let name = "par";
  let cppNamespace = "::mlir::par";
  let summary = "Sharded tensor programs over a named device mesh.";
  let description = [{
    The `par` dialect describes a training program written for one device
    together with how each tensor is split over a logical device mesh.
    A module declares one or more meshes (`par.mesh`); values carry
    `#par.sharding` attributes (on function arguments and results through the
    `par.sharding` argument/result attribute, on op results through the
    `par.sharding` op attribute). Every compute op states its sharding rule,
    an einsum-like factor mapping read by propagation, partitioning, the cost
    model and auto-sharding alike.

    ```mlir
    par.mesh @mesh <["dp"=2, "tp"=4]>
    func.func @mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {} ]>},
                   %w: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"} ]>})
        -> tensor<8x64xf32> {
      %h = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
      return %h : tensor<8x64xf32>
    }
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasConstantMaterializer = 1;
  let extraClassDeclaration = [{
    /// Name of the discardable attribute holding a value's sharding.
    static constexpr ::llvm::StringLiteral kShardingAttrName = "par.sharding";
    /// Unit attribute on a function the partitioner made local: its types
    /// are per-device.
    static constexpr ::llvm::StringLiteral kZeroAttrName = "par.zero";
    static constexpr ::llvm::StringLiteral kDataAxisAttrName = "par.data_axis";
    static constexpr ::llvm::StringLiteral kLateAttrName = "par.late";
    /// The training step's marks on ops (TrainingStep.h): the phase, the
    /// parameters (argument numbers) whose gradient an op's result is, and
    /// the master weight whose working copy it is.
    static constexpr ::llvm::StringLiteral kPhaseAttrName = "par.phase";
    static constexpr ::llvm::StringLiteral kGradientOfAttrName =
        "par.gradient_of";
    static constexpr ::llvm::StringLiteral kCopyOfAttrName = "par.copy_of";
    /// The model layer (block) an op belongs to: set by the frontend on the
    /// forward ops of each block, carried by autodiff to their gradients.
    static constexpr ::llvm::StringLiteral kLayerAttrName = "par.layer";
    /// Pipelines (--par-pipeline): the stage an op runs in, the
    /// micro-batch it works on, and on the step the pipeline's record
    /// (axis, stages, micro-batches, schedule, the first layer of each
    /// stage). After --par-schedule splits a pipelined step, each stage is
    /// a function with `par.stage_of` (the step's name) and `par.stage`;
    /// its arguments and results say which of the step's inputs
    /// (`par.input`) and outputs (`par.output`) they are; its ops carry
    /// their place in the step's global order (`par.order`), and each
    /// send the order of the receive that matches it (`par.matched`).
    static constexpr ::llvm::StringLiteral kStageAttrName = "par.stage";
    static constexpr ::llvm::StringLiteral kMicrobatchAttrName =
        "par.microbatch";
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "par.pipeline";
    static constexpr ::llvm::StringLiteral kStageOfAttrName = "par.stage_of";
    static constexpr ::llvm::StringLiteral kInputAttrName = "par.input";
    static constexpr ::llvm::StringLiteral kOutputAttrName = "par.output";
    static constexpr ::llvm::StringLiteral kOrderAttrName = "par.order";
    static constexpr ::llvm::StringLiteral kMatchedAttrName = "par.matched";
    /// On a backward op of a zb-h1 pipeline that only makes weight
    /// gradients (unit): it runs in the micro-batch's W slot, after the B
    /// slot that makes the gradient the stage before needs.
    static constexpr ::llvm::StringLiteral kWeightGradientAttrName =
        "par.weight_gradient";
    /// On a forward op cloned into the backward pass by rematerialization
    /// (--par-remat): it recomputes a value the backward pass reads
    /// instead of keeping it.
    static constexpr ::llvm::StringLiteral kRecomputedAttrName =
        "par.recomputed";
    /// On a training step rematerialized by --par-remat: a dictionary with
    /// the `mode` asked for, the `layers` in forward order and the mode
    /// each got (`modes`); under `auto`, the `budget` and the planned
    /// `peak` per device in bytes.
    static constexpr ::llvm::StringLiteral kRematAttrName = "par.remat";
    /// On a training step (--par-autodiff bucket=SIZE): the largest bucket
    /// of gradient all-reduces in bytes per device, 0 for none.
    static constexpr ::llvm::StringLiteral kBucketBytesAttrName =
        "par.bucket_bytes";
    /// On an all-reduce or reduce-scatter that --par-combine-collectives
    /// made of a bucket of gradient reductions: how many gradients it
    /// carries.
    static constexpr ::llvm::StringLiteral kBucketAttrName = "par.bucket";
    /// On a training step under ZeRO stage 3 (--par-autodiff prefetch=N):
    /// how many layers ahead of their use --par-schedule issues the
    /// parameter gathers (0: just before the use).
    static constexpr ::llvm::StringLiteral kPrefetchAttrName = "par.prefetch";
    static constexpr ::llvm::StringLiteral kPartitionedAttrName =
        "par.partitioned";
    /// On a function --par-fuse ran on: its consecutive optimizer updates
    /// (adamw, sgd) that touch disjoint memory run as one launch (the
    /// program's `batch`, written by --emit-program).
    static constexpr ::llvm::StringLiteral kBatchUpdatesAttrName =
        "par.batch_updates";
    /// On a partitioned function: the FLOPs of one call on global shapes
    /// (each compute op's work once), what MFU is measured against.
    static constexpr ::llvm::StringLiteral kModelFlopsAttrName =
        "par.model_flops";
    /// On the module: what --auto-shard planned with and chose (hardware
    /// profile, memory limit, axis roles, ZeRO stage, predicted step).
    static constexpr ::llvm::StringLiteral kAutoShardAttrName =
        "par.auto_shard";
    /// On a value's producer (one entry per result) or a function
    /// argument: --auto-shard chose its sharding; a dictionary with the
    /// best other layout (`beat`) and its extra seconds per step (`by`),
    /// empty when there was no other (--par-explain-sharding prints it).
    static constexpr ::llvm::StringLiteral kPlannedAttrName = "par.planned";
    /// On a par.mesh: the axes --mesh named by position (x, y, ...), which
    /// --auto-shard renames by the role it gives them.
    static constexpr ::llvm::StringLiteral kUnnamedAxesAttrName =
        "par.unnamed_axes";
    /// On the arguments and results of a partitioned function: the global
    /// type and the sharding that the local value is a piece of.
    static constexpr ::llvm::StringLiteral kGlobalTypeAttrName =
        "par.global_type";
    static constexpr ::llvm::StringLiteral kGlobalShardingAttrName =
        "par.global_sharding";
    /// What the runtime makes of arguments and results (see
    /// docs/program-format.md): a name, the role (param or data), how a
    /// parameter is initialized, what data feeds a data input and the token
    /// vocabulary, and which argument a result replaces after a step.
    static constexpr ::llvm::StringLiteral kNameAttrName = "par.name";
    static constexpr ::llvm::StringLiteral kRoleAttrName = "par.role";
    static constexpr ::llvm::StringLiteral kInitAttrName = "par.init";
    static constexpr ::llvm::StringLiteral kDataAttrName = "par.data";
    static constexpr ::llvm::StringLiteral kVocabAttrName = "par.vocab";
    static constexpr ::llvm::StringLiteral kUpdatesAttrName = "par.updates";
    /// On a flat (rank-1) parameter, state or the result that replaces it:
    /// the shape its first elements are a row-major view of (the rest is
    /// padding). Initialization, checkpoints and dumped outputs see the
    /// tensor in this shape (ZeRO's flattened split).
    static constexpr ::llvm::StringLiteral kViewAttrName = "par.view";
    /// On each op of the view that reads a flat master's working copy in
    /// its view shape (--par-autodiff's slice and reshape).
    static constexpr ::llvm::StringLiteral kViewOfAttrName = "par.view_of";

  private:
    /// Registers the attributes (defined beside their storage classes).
    void registerAttributes();
  public:
  }];
}

class Par_Op<string mnemonic, list<Trait> traits = []>
    : Op<Par_Dialect, mnemonic, traits> {
  // The runtime catalogue (scripts/gen-catalogue.py) lists every op whose
  // `inProgram` is set: program files may hold it as an instruction.
  bit inProgram = 1;
  // Optional results computed from the optional operands (sgd's momentum):
  // present exactly when those operands are.
  bit pairedOptionals = 0;
  // The op holds a body of ops that programs write as its `body` attribute
  // (par.fused).
  bit programBody = 0;
}

class Par_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Par_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // PAR_DIALECT_TD
