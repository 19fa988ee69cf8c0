//===- Passes.td - par passes ------------------------------*- tablegen -*-===//
#ifndef PAR_TRANSFORMS_PASSES_TD
#define PAR_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Utilities: the mesh, summaries and rule tests
//===----------------------------------------------------------------------===//

def SetMeshPass : Pass<"par-set-mesh", "::mlir::ModuleOp"> {
  let summary = "Create or override the module's mesh";
  let description = [{
    Gives the module the mesh described by `mesh`: named axes
    (`dp=2,tp=4,pp=4`) replace the mesh's axes; positional sizes (`4x4x2`)
    resize its axes in order and keep their names (a module without a mesh:
    the axes its shardings name on @mesh, in the order they first appear),
    and further sizes add axes named x, y, z, w (a0, a1, ... past four, or
    when the name is taken). Fewer sizes than the axes the shardings use is
    an error that lists them. A module without a `par.mesh` gets
    `par.mesh @mesh`; a module with one keeps its name; a module with
    several is an error, since which to override is ambiguous. Shardings
    naming axes the new mesh lacks fail verification afterwards, with the
    offending value's location. `par-opt --mesh=SPEC` runs this pass first.

    ```mlir
    // par-opt --mesh=dp=2,tp=4
    par.mesh @mesh <["dp"=2, "tp"=4]>
    ```
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "Mesh: sizes like 4x4x2 or named axes like dp=2,tp=4">,
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def AutoShardPass : Pass<"auto-shard", "::mlir::ModuleOp"> {
  let summary = "Choose every value's sharding from a cost model (ILP, CBC)";
  let description = [{
    Plans the shardings of every function on the module's one mesh
    (docs/auto-shard.md). Each mesh axis of more than one device is placed
    by an integer program solved exactly with COIN-OR CBC (largest axis
    first, given the axes already placed): each op chooses which factor of
    its sharding rule the axis splits (or none), each argument which dim;
    the objective is the predicted time (each op's work under its split,
    and every reshard between the layout a value is produced in and the one
    its reader needs, priced by the hardware profile), under a row that
    bounds the per-device bytes of arguments, gradients and activations.
    User shardings (arguments, results, constraints) are kept; a result
    without one is returned in the layout it is made in, its pending sums
    added. Every value gets a closed sharding, and a `par.sharding_constraint` marks each
    planned reshard, so --par-propagate and --par-partition do what was
    planned. Whole plans are compared: the free program's, and one per
    split of the axes between data and tensor parallelism, each with every
    ZeRO stage (over its data axis) a training step left open. Each is
    estimated (the program's time and what its ZeRO stage changes in it,
    gradient and parameter collectives priced in the step's buckets; the
    bytes it keeps per device); the best estimates are then checked
    (partitioned on a copy, scheduled and memory planned) until three fit,
    then only those estimated faster than the estimate of the best
    checked, and the fastest checked plan that fits the limit
    wins. Where no training step has a remat mode (--par-remat), up to
    three plans checked to be over the limit (more while none fits) are
    checked again with --par-remat=auto under the limit, and compete by
    their time with the recomputation; the winner's modes are applied. When none fits, every
    plan is checked and the error names the smallest per-device memory
    found. The module records the plan in
    `par.auto_shard` (profile, limit, axis roles, ZeRO stage, predicted
    step and memory, plans considered and checked, the best alternatives),
    which --report prints; each value records the best other layout at its
    producer and what it would add (`par.planned`), which
    --par-explain-sharding prints. Mesh axes that --mesh named by position
    are renamed by their role (dp, tp, ...). Profiles of this machine come
    from `par-run --calibrate`.

    ```sh
    par-opt model.mlir --auto-shard --mesh=4x4x2 --report -o plan.mlir
    par-opt model.mlir --auto-shard="hardware=a100-8x-ib200 memory=40GiB" --mesh=dp=8,tp=8
    ```
  }];
  let options = [
    Option<"hardware", "hardware", "std::string", /*default=*/"\"\"",
           "Hardware profile: a preset (h100-8x-ib400, a100-8x-ib200, "
           "cpu-local) or a JSON file; default h100-8x-ib400">,
    Option<"memory", "memory", "std::string", /*default=*/"\"\"",
           "Per-device memory limit (40GiB, 80GB, bytes); default the "
           "profile's memory_bytes">,
    Option<"pipeline", "pipeline", "std::string", /*default=*/"\"auto\"",
           "auto: a training step that --par-pipeline left alone may be "
           "pipelined, its stages on a mesh axis and its batch divided "
           "into micro-batches, where that plan wins; off: never">,
    Option<"sequence", "sequence", "std::string", /*default=*/"\"auto\"",
           "auto: the best plan that splits weights over a tensor axis, "
           "and the best that splits them over that axis alone, are also "
           "checked with Megatron's sequence parallelism (the residual "
           "stream split over the sequence on an axis that splits weights "
           "and not the batch, inside the nodes), which wins where it is "
           "faster or fits; off: never">,
    Option<"fuse", "fuse", "std::string", /*default=*/"\"auto\"",
           "on: plan for the program --par-fuse makes (an element-wise "
           "group costs one pass over its inputs and result; the checks "
           "fuse their copies, so time and memory are that program's); "
           "off: for the unfused program; auto: on where par-opt runs "
           "--par-fuse later in the same pipeline">,
    Option<"checks", "checks", "std::string", /*default=*/"\"short\"",
           "short: a plan for a step of short-from layers or more whose "
           "middle layers are copies is checked on two copies of the step "
           "with 3 and 4 layers (a pipelined one with 1 and 2 layers a "
           "virtual stage), what the second adds counted once per layer "
           "left out, and the chosen plan checked whole; whole: every "
           "check partitions the whole module">,
    Option<"shortFrom", "short-from", "int64_t", /*default=*/"48",
           "the fewest layers (par.layer) of a step checked on shortened "
           "copies under checks=short (at least 8): shallower steps are "
           "checked whole, whose time the copies can misread by more (up "
           "to 24% on the 24-layer GPT 1.3B for 1,024 devices) for less "
           "saved">,
    Option<"prune", "prune", "std::string", /*default=*/"\"2\"",
           "a plan whose integer program's bound (where CBC would branch) "
           "shows it estimated over this many times the best estimate of a "
           "plan estimated to fit is pruned, not solved (a number of 1 or "
           "more; off: none is); where a pruned plan could have been "
           "checked, every plan is made again with none pruned, so the "
           "plan chosen is the same">,
    Option<"branchNodes", "branch-nodes", "int64_t", /*default=*/"200",
           "CBC's node limit for an integer program that needs branching, "
           "branched on first with no cutting planes but probing; one not "
           "proven optimal within it is solved again with all of them and "
           "no limit (0: straight to that)">,
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def SummaryPass : Pass<"par-summary", "::mlir::ModuleOp"> {
  let summary = "Print a summary of meshes, functions and shardings";
  let description = [{
    Writes a human-readable report to standard output (before the IR that
    par-opt prints): every mesh with its axes and device count; for every
    function its op counts, and for every sharded argument, result and op
    result its sharding, per-device (local) shape and bytes per device next
    to the global bytes. Values without a sharding count as replicated.
    The module is not changed.

    ```
    par-opt model.mlir --mesh=dp=2,tp=4 --par-summary
    ```
  }];
}

def TestShardingRulesPass : Pass<"par-test-sharding-rules"> {
  let summary = "Report the sharding rule of every par op (for tests)";
  let description = [{
    Emits a remark on every `par` op: its factor mapping, e.g.
    `sharding rule: ([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16 reduction(sum)}`,
    or `no sharding rule` for ops that have none (mesh, reshard, collectives,
    send/recv). Each rule is first checked against the op's shapes (factor
    sizes multiply to dimension sizes, reduction factors absent from results);
    a broken rule is an error.
  }];
}

def TestShortenedStepPass : Pass<"par-test-shortened-step",
                                 "::mlir::ModuleOp"> {
  let summary = "Replace the training step by a copy with fewer middle "
                "layers (for tests)";
  let description = [{
    What --auto-shard checks a plan of a deep step on (checks=short): the
    step keeps its first `first` layers and its last, and the middle layers
    between them are dropped, with their parameters, optimizer states and
    updates. The module must have one function, a training step whose
    middle layers are copies of its second layer; otherwise an error says
    why not. With `stage-layers=k`, a pipelined step instead keeps the first
    k layers of each virtual stage, more where a stage has more layers than
    the fewest of a stage on its device, one more on the first device, the
    last stage its last layer among them (shortenedStages), as a pipelined
    plan is checked.
  }];
  let options = [
    Option<"first", "first", "int64_t", /*default=*/"2",
           "How many of the first layers to keep (at least 2, and at most "
           "the step's layers less 2)">,
    Option<"stageLayers", "stage-layers", "int64_t", /*default=*/"0",
           "Of a pipelined step: how many layers each virtual stage keeps "
           "(0: keep the first `first` layers and the last instead)">,
  ];
}

//===----------------------------------------------------------------------===//
// Propagation: user annotations to every tensor
//===----------------------------------------------------------------------===//

def PropagatePass : Pass<"par-propagate", "::mlir::ModuleOp"> {
  let summary = "Infer a sharding for every tensor from a few annotations";
  let description = [{
    GSPMD/Shardy-style propagation. Shardings given on function arguments
    and results, on op results (`par.sharding`) and by
    `par.sharding_constraint` spread through every op's sharding rule, both
    ways, to a fixed point; afterwards every ranked-tensor value (function
    arguments and results included) carries a sharding. Annotated shardings
    are never changed except that open dims (`{"tp", ?}`) may gain axes;
    closed dims and `replicated` axes never receive axes; a result whose
    reduced (contracted) dimension is split gets `partial={...}` over those
    axes. Inferred shardings are written with closed dims.

    Order: user priorities (`p0` before `p1`, then annotations without a
    priority), within each the op levels (shape-preserving ops, then the
    rest, then broadcast-like ops forward and values with several uses),
    conflicts resolved per factor by a parameter (or its gradient, working
    copy or view) before an activation, then the larger tensor, then the
    more sharded, then the lower operand index; a factor claims mesh axes
    with the rank of the strongest tensor asking for exactly its axes.
    docs/propagation.md has the exact rules (and how Megatron's sequence
    parallelism comes out of them).

    Diagnostics: a warning at an annotated value whose sharding some op can
    use only fully replicated (it will be gathered), with a note at the op
    (not for constraints autodiff made in the backward pass);
    a remark at an op that cannot carry some axes (a reshape whose sizes do
    not divide, heads that do not divide the KV heads).

    ```mlir
    // in:  %x with <@mesh, [{"dp"}, {} ]>, %w1 with <@mesh, [{}, {"tp"} ]>
    %h = par.dot %x, %w1 contract [1] x [0] : ...
    // out: %h gets <@mesh, [{"dp"}, {"tp"} ]>
    ```
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Also print the --par-explain-sharding report to standard output">,
    Option<"diagnose", "diagnose", "bool", /*default=*/"true",
           "Report shardings ops cannot carry (remarks, warnings); off for "
           "copies whose diagnostics are discarded">,
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def ExplainShardingPass : Pass<"par-explain-sharding", "::mlir::ModuleOp"> {
  let summary = "Propagate shardings and explain where each one came from";
  let description = [{
    Runs `--par-propagate` and prints, per function, every tensor's final
    sharding and, for each axis, the annotated tensor it came from and the
    ops it crossed (with source locations); then every conflict an op met,
    the competing shardings and which rule decided it. The module is
    changed exactly as by `--par-propagate`.

    ```
    par-opt model.mlir --par-explain-sharding -o /dev/null
    ```
  }];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

//===----------------------------------------------------------------------===//
// Partitioning: the global program to per-device programs (--par-partition)
//===----------------------------------------------------------------------===//

def SplitCheckpointsPass : Pass<"par-split-checkpoints", "::mlir::ModuleOp"> {
  let summary = "Keep recomputed layers' inputs split over an axis until "
                "the backward pass (ZeRO-R's partitioned activation "
                "checkpoints)";
  let description = [{
    Runs after --par-propagate (the first steps of --par-partition) on a
    training step whose `par.remat` names a `checkpoint_axis`
    (`--par-remat="full checkpoint-axis=tp"`). Each checkpoint, an
    activation made in the forward pass that a recomputed op reads (a
    layer's input), is constrained right after it is made to its layout
    plus that axis on the dim it divides with the most elements left (a
    local slice), and its readers in later phases read it through a
    constraint back to its layout issued just before the first of them (an
    all-gather, par.late). Between the two a device keeps 1/n of it. A
    checkpoint already split over the axis, or with no dim the axis
    divides, stays whole.
  }];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def InsertReshardsPass : Pass<"par-insert-reshards", "::mlir::ModuleOp"> {
  let summary = "Make every op's tensors agree with one sharding of its factors";
  let description = [{
    First step of partitioning; run after `--par-propagate`. For every op
    with a sharding rule, one axis list per factor is chosen with the rules
    of propagation (compatible prefixes merge; conflicts go to the earlier
    user priority, then a parameter before an activation, then the larger
    tensor, so a weight stays in place and the activation moves). Then:
    - an operand whose sharding differs (or that is partial) is replaced by
      `par.reshard` to the sharding the op uses; one reshard per value and
      target, placed right after the value's definition, except that a
      forward activation gathered for a backward reader gets a gather of
      its own there (`par.late`), so only its split copy is kept;
    - a result whose annotated sharding differs from what the op produces
      takes the produced sharding (partial over split reductions) and a
      `par.reshard` after the op restores the annotated one for its users;
    - a returned value is resharded to its function result's sharding;
    - a `par.sharding_constraint` whose input has another layout becomes a
      `par.reshard`.
    Values without a sharding count as replicated. Afterwards every op
    consumes exactly the layouts it computes with, which is what the
    collective lowering and the local conversion expect; a second run
    inserts nothing.

    ```mlir
    // %y is partial over "tp"; the function result is not:
    %r = par.reshard %y <@mesh, [{"dp"}, {} ]> : tensor<8x16xf32>
    return %r : tensor<8x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numReshards", "reshards-inserted", "Reshards inserted">
  ];
}

def ToLocalPass : Pass<"par-to-local", "::mlir::ModuleOp"> {
  let summary = "Rewrite a sharded global program as one per-device program";
  let description = [{
    Last step of partitioning; runs on the output of `--par-insert-reshards`
    (every op consumes the layouts it computes with). Every value takes the
    type of one device's piece; functions get `par.partitioned`, and their
    arguments and results keep the global type and sharding as
    `par.global_type` / `par.global_sharding`.

    Each `par.reshard` (and `par.sharding_constraint`) becomes the collective
    sequence of the reshard planner: partial axes are reduce-scattered into a
    dim that wants them or all-reduced; axes move between dims with
    all-to-all, swap with an equal-size axis with collective-permute, leave a
    dim with all-gather and join one with all-slice (no traffic). A sequence
    that gathers a dim and slices it again gets a remark naming the op.

    Local forms: a dot or sum over a split dim is a partial sum; a mean over
    split dims is scaled by 1/shards; an embedding with a split vocabulary
    looks up `ids - shard start` (other shards' rows give zeros, the result is
    partial); cross-entropy with a split vocabulary all-reduces the max, the
    sum of exponentials and a masked target logit over the vocabulary axes,
    never the logits; rope and causal attention with a split sequence get
    the shard's first position as `offset` (from `par.axis_index`); a sharded
    non-splat constant is sliced with all-slice. A dim that does not divide
    into its shards is padded to ceil(size / shards) per device: reductions,
    contractions and losses over it first replace the padding with their
    identity (a mask from `par.axis_index`), a local mean weighs
    local / global elements, gathers cut the padding off and uneven splits
    pad with zeros (docs/partitioning.md, "Uneven splits").
  }];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numCollectives", "collectives", "Collectives in the per-device program">,
    Statistic<"numBytesSent", "bytes-sent", "Bytes one rank sends per step through them">
  ];
}

def SinkPartialsPass : Pass<"par-sink-partials", "::mlir::ModuleOp"> {
  let summary = "Resolve partial sums after the linear ops that consume them";
  let description = [{
    Runs after `--par-insert-reshards`. A reshard that resolves the partial
    (sum) axes of its input (keeping its split), and whose single user is
    linear in it, moves past that user: the user computes on the partial value, its result
    becomes partial over the same axes, and the reshard follows it. Linear
    ops: add and sub when every operand resolves the same partial axes (one
    collective instead of one per operand); neg, float convert, transpose,
    reshape, slice, reduce sum/mean, dot, mul, and div by a non-partial
    divisor when the result is no larger than the partial input. Repeated to
    a fixed point, so a partial value travels as far as the linear ops go,
    and a consumer that wants the result sharded over the partial axes gets
    a reduce-scatter instead of an all-reduce. A resolving reshard whose
    user is another reshard folds into it (an all-reduce then a slice is a
    reduce-scatter). A reshard that also scatters the sum (a
    reduce-scatter) moves past an add or sub whose operands all come
    through such reshards from one layout to one target: one
    reduce-scatter after the sum. Max/min partials never move.
  }];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numSunk", "partials-sunk", "Partial-sum reshards moved past a linear op">
  ];
}

def CombineCollectivesPass : Pass<"par-combine-collectives", "::mlir::ModuleOp"> {
  let summary = "Issue independent small all-reduces on one group as one";
  let description = [{
    Runs on a per-device program (after `--par-to-local`; the last step of
    `--par-partition`). All-reduces with the same mesh axes, combiner,
    element type, phase and layer, none of which depends on another's result,
    become one all-reduce of their inputs flattened and concatenated, right
    after the last of the inputs (ops that read an earlier member's result
    before that point move after it); each result is its slice of the
    combined buffer. A combined buffer
    stays within `max-bytes` (small collectives cost latency, not bandwidth;
    large gradient buckets are a different trade against overlap). Late
    all-reduces are not combined (but for ZeRO-1's gradient reductions,
    below). The result computes the same values with fewer collectives:
    the vocabulary-parallel cross-entropy issues three all-reduces, not
    four. A training step with a bucket size (`par.bucket_bytes`,
    --par-autodiff bucket=) fills buckets of its gradient all-reduces and
    (ZeRO) reduce-scatters in program order instead, each issued after its
    last gradient (ZeRO-1's deferred ones in late buckets of their own) and
    marked `par.bucket`; and buckets of the all-gathers of its parameter
    shards (ZeRO's working copies, ZeRO-3's gathers by pass and reading
    layer), one all-gather of the shards packed as rows, marked
    `par.bucket` with their number of parameters.

    ```sh
    par-opt model.mlir --par-propagate --par-to-local --par-combine-collectives
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", "1048576",
           "Largest combined buffer, in bytes">
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
  let statistics = [
    Statistic<"numCombined", "collectives-combined", "Collectives folded into a combined one or a bucket">
  ];
}

//===----------------------------------------------------------------------===//
// Lowering and reports: schedule, memory plan, runtime program
//===----------------------------------------------------------------------===//

def CommReportPass : Pass<"par-comm-report", "::mlir::ModuleOp"> {
  let summary = "Print every collective of the partitioned program";
  let description = [{
    Writes to standard output, per partitioned function (one call is one
    step), one line per collective: its kind, mesh axes, group size, the
    element count and bytes of its buffer on one rank (the larger of input
    and output), and the bytes one rank sends with bandwidth-optimal
    algorithms (all-reduce 2(n-1)/n of the buffer; all-gather,
    reduce-scatter and all-to-all (n-1)/n; a permute the whole buffer;
    all-slice nothing); then totals per mesh-axis group and per step. The
    module is not changed. See docs/partitioning.md.

    ```sh
    par-opt model.mlir --par-propagate --par-partition --par-comm-report
    ```
  }];
}

def PipelinePass : Pass<"par-pipeline", "::mlir::ModuleOp"> {
  let summary = "Pipeline parallelism: stages over a mesh axis, "
                "micro-batches with gradient accumulation, a schedule";
  let description = [{
    Runs on a training step from --par-autodiff (after --par-remat, before
    --par-propagate). The layers of the model (ops marked `par.layer`) are
    split into as many stages as the pipeline axis has devices: as the
    forward ops' `par.stage` marks say, else as `layers=` says (layers per
    stage), else balanced by their FLOPs. Propagation never splits a tensor
    over the pipeline axis (a sharding that names it is an error).

    The function's batch is one micro-batch: with `microbatches=m`, each
    data argument takes a leading dimension of m (micro-batch i is its
    slice i), the forward and backward passes run once per micro-batch, and
    what leaves them (gradients, the loss) is their mean, so the step
    equals one over the m micro-batches together; the optimizer runs once.

    Every op gets the stage it runs in (`par.stage`), each forward and
    backward op its micro-batch (`par.microbatch`), and the step records the
    pipeline (`par.pipeline`). --par-schedule then splits the step into one
    function per stage, ordered by the `schedule`, with `par.send`/`par.recv`
    where a value crosses stages; --emit-program writes one rank class per
    stage (docs/pipelines.md). Schedules: `gpipe` (every forward, then every
    backward); `1f1b` (one forward, one backward in turn after a warm-up);
    `interleaved` (`virtual=v` model chunks per device, the layers cut into
    p*v virtual stages, chunk c on device c mod p, Megatron's order; the
    micro-batches a multiple of p); `zb-h1` (1f1b with each backward split
    into the input gradient B and the weight gradients W, which fill the
    gaps the pipeline leaves).

    ```sh
    par-opt gpt.mlir --par-autodiff=optimizer=adamw \
      --par-pipeline="microbatches=4 schedule=1f1b" --par-propagate \
      --par-partition --emit-program=gpt.parprog
    ```
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"pp\"",
           "the mesh axis whose devices are the stages, or auto "
           "(--auto-shard chooses it and places the stages; needs "
           "microbatches=)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"0",
           "micro-batches per step (default: the number of stages)">,
    Option<"divideBatch", "divide-batch", "bool", /*default=*/"false",
           "the step is written at its whole batch: divide each data "
           "argument's batch (first) dimension into the micro-batches "
           "(default: the step is written at one micro-batch and reads m "
           "of them)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved, zb-h1, or auto (--auto-shard's "
           "choice: schedules checked best estimate first, the fastest "
           "that fits kept; else the smallest "
           "simulated bubble)">,
    Option<"virtualStages", "virtual", "int64_t", /*default=*/"1",
           "model chunks per device (interleaved: 2 or more)">,
    ListOption<"layers", "layers", "int64_t",
               "layers per stage, first stage first (default: balanced by "
               "FLOPs, or the ops' par.stage marks)">,
  ];
}

def FusePass : Pass<"par-fuse", "::mlir::ModuleOp"> {
  let summary = "Run chains and trees of element-wise ops, and the reductions and normalizations that end them, as single kernels";
  let description = [{
    Groups each tree of element-wise ops (arithmetic, activations, compare,
    select, convert) whose intermediate values are read only inside the
    tree, together with the broadcasts and splat constants they read, into
    one `par.fused` op: the runtime computes each element of the group's
    result from its inputs' elements in registers, so the intermediates
    never take memory or a pass over it. A broadcast or constant read
    elsewhere too is copied into the group. A float reduction over
    adjacent dims ends the tree that feeds it (its elements stream into
    the reduction, in the unfused reduction's order), and so does a
    layer_norm or rms_norm (residual + layer norm: the group normalizes
    the rows it computes, its scales read as inputs); a reduction along
    rows or a normalization also keeps the value it reads when that value
    is read after it (a second result: the residual stream). Ops are grouped only with ops of the same phase,
    layer and pipeline slot (equal discardable attributes; a gradient mark
    on the root does not count, and a normalization takes in the residual
    sum of the layer before). Run it after --par-partition (or on an unpartitioned
    program) and before --emit-program (docs/training.md, "Fusion").

    It also marks each function `par.batch_updates`: --emit-program then
    runs each run of consecutive optimizer updates (adamw, sgd) whose
    buffers are disjoint in the memory plan as one batch, one launch over
    every parameter (the multi-tensor optimizer; docs/program-format.md,
    "Batched updates").

    ```sh
    par-opt model.mlir --par-propagate --par-partition --par-fuse --emit-program=model.parprog
    ```
  }];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def SchedulePass : Pass<"par-schedule", "::mlir::ModuleOp"> {
  let summary = "Order each function's ops: collectives as early as they can, gathers of parameters and saved activations just ahead of their use";
  let description = [{
    A list schedule of every function body: an op is ready once its operands
    are defined; among ready ops a collective goes first (so a runtime that
    overlaps communication with compute can start it early), otherwise the
    op that came first in the input. Ops with side effects keep their
    relative order. The result computes the same values.

    Then ops marked `par.late`, and collectives that move a late op's
    result, go down to just before their first use (or `par.prefetch`
    layers ahead of it); a gather in one phase of a value made in an earlier
    phase (a saved activation the backward pass reads whole) goes to the
    start of its first reader's run of ops of that layer and phase.

    A step pipelined by --par-pipeline is then split into one function per
    stage (`@STEP.stageK`), its ops in the order its schedule runs them,
    with `par.send`/`par.recv` for the values stages exchange; the step
    stays as a declaration (docs/pipelines.md).

    ```sh
    par-opt model.mlir --par-propagate --par-partition --par-schedule
    ```
  }];
}

def MemoryPlanPass : Pass<"par-memory-plan", "::mlir::ModuleOp"> {
  let summary = "Print the static memory plan of each function";
  let description = [{
    Writes to standard output, per function, every buffer the runtime
    allocates (arguments, then op results in op order) with its per-device
    type, bytes, live range in instructions and offset in the arena, then
    the arena size (the planned peak per rank) and the most bytes live at
    once. Buffers are placed greedily, largest first, at the lowest
    `alignment`-aligned offset free over their live range. The module is not
    changed; --par-emit-program writes the same plan. See
    docs/program-format.md.
  }];
  let options = [
    Option<"asyncCollectives", "async-collectives", "bool", /*default=*/"false",
           "Plan for collectives that run asynchronously: a collective's "
           "operand stays taken until its result is first read">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Byte alignment of every buffer in the arena">,
  ];
}

def ReportPass : Pass<"par-report", "::mlir::ModuleOp"> {
  let summary = "Print per-device memory by category and communication per step";
  let description = [{
    For each function, on the memory plan --par-emit-program writes (run
    --par-schedule first, as --emit-program does), every buffer of a device
    is counted in one category: parameters, gradients, optimizer states,
    activations, data or temporaries. Per category: its buffers, their
    bytes, the most of them live at once, and what is live at the planned
    peak; with the alignment padding and fragmentation these add up to the
    arena par-run allocates. Then the model states (parameters + gradients
    + optimizer states) per parameter, and the collectives of one call by
    kind and mesh axes: count, elements, elements moved (an all-reduce
    counts twice: reduce-scatter plus all-gather) and bytes sent.

    In a training step (--par-autodiff) the optimizer states are the update
    ops' states, the step counter and loss scale, and the fp32 masters when
    the step computes with a low-precision copy; the parameters are the copy
    the step computes with (gathered once per step under ZeRO 1-2, the
    local shard under ZeRO 3); the gradients are the buffers the updates
    read before unscaling and clipping (full-size when ZeRO 1 defers the
    reduce-scatter to the update); activations are forward values the
    backward pass reads. See docs/training.md.

    For a partitioned function, last, the predicted time of one call on a
    hardware profile (docs/auto-shard.md): compute (each op's FLOPs at the
    GEMM or memory-bound share of the peak, or its bytes over the memory
    bandwidth), communication (each collective's alpha-beta time on the
    link level its axes span), the part of it exposed, the step, the model
    FLOPs (global shapes, par.model_flops) and MFU.

    `par-opt --report` schedules and prints this to standard error after
    all other passes.
  }];
  let options = [
    Option<"asyncCollectives", "async-collectives", "bool", /*default=*/"false",
           "Plan for collectives that run asynchronously: a collective's "
           "operand stays taken until its result is first read">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Byte alignment of every buffer in the arena">,
    Option<"toStderr", "to-stderr", "bool", /*default=*/"false",
           "Print to standard error instead of standard output">,
    Option<"hardware", "hardware", "std::string", /*default=*/"\"\"",
           "Hardware profile of the predicted step (a preset or a JSON "
           "file; default: the one --auto-shard planned with, else "
           "h100-8x-ib400)">,
  ];
}

def EmitProgramPass : Pass<"par-emit-program", "::mlir::ModuleOp"> {
  let summary = "Write the runtime program (versioned JSON) that par-run executes";
  let description = [{
    Lowers one function to a program file (docs/program-format.md): the mesh
    and rank count, communicator groups, the inputs and outputs with their
    global shapes, shardings and roles, one instruction per op in the
    function's order (run --par-schedule first to issue collectives early),
    and a static memory plan (as --par-memory-plan prints). A function marked
    `par.partitioned` runs on every device of its mesh; any other function
    is a single-device program and its sharding annotations are ignored.
    `par-opt --emit-program=FILE` schedules and emits after the other passes.

    ```sh
    par-opt model.mlir --mesh=dp=2,tp=4 --par-propagate --par-partition \
        --emit-program=model.parprog
    ```
  }];
  let options = [
    Option<"asyncCollectives", "async-collectives", "bool", /*default=*/"false",
           "Plan for collectives that run asynchronously: a collective's "
           "operand stays taken until its result is first read">,
    Option<"file", "file", "std::string", /*default=*/"\"-\"",
           "Where to write the program ('-' for standard output)">,
    Option<"function", "function", "std::string", /*default=*/"\"\"",
           "The function to emit (default: the module's only defined function)">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Byte alignment of every buffer in the arena">,
  ];
}

//===----------------------------------------------------------------------===//
// Training: the step and ZeRO
//===----------------------------------------------------------------------===//

def AutodiffPass : Pass<"par-autodiff", "::mlir::ModuleOp"> {
  let summary = "Turn a forward function returning a scalar loss into a training step";
  let description = [{
    Reverse-mode differentiation of every function whose first result is a
    0-d floating-point loss: the gradient of the loss with respect to every
    parameter argument (`par.role = "param"`, or floating-point arguments
    without a role) is built from the forward values by each op's gradient
    rule, in ops of the catalogue, so propagation and partitioning treat the
    backward pass like the forward one. Then, with `optimizer=sgd` or
    `optimizer=adamw`, each parameter gets its update op; optimizer states
    (momentum, the two AdamW moments, a step counter) become new parameter
    arguments initialized to zeros and replaced by the function's new
    results (`par.updates`), as are the parameters. With `optimizer=none`
    the function returns the loss and one gradient per parameter (named
    `grad.NAME`). Other results of the forward function are dropped.
    An op without a gradient rule is an error naming it.

    `clip=C` scales every gradient by min(1, C / norm) where norm is the
    global L2 norm over all gradients; the squared sums of sharded
    gradients are all-reduced by the partitioner like any partial sum, so
    clipping gives the same answer under every sharding. The learning rate
    warms up linearly over `warmup` steps (lr t / warmup at step t) and
    then, with `decay-steps=N`, follows a cosine from lr at the end of the
    warm-up to `min-lr-ratio` lr at step N, constant after; the schedule is
    a table in the program indexed by the step counter (a state named
    `step`). The step's learning rate and the norm before clipping are
    results named `log.lr` and `log.grad_norm`, which par-run prints.

    `precision=bf16` or `fp16`: the parameters stay fp32 master weights (as
    do the optimizer states); each step converts them once to the low
    precision, and the forward and backward passes compute in it (the
    kernels accumulate in fp32); gradients are low precision and the update
    applies them to the masters. fp16 adds dynamic loss scaling: the loss
    is scaled by a state `loss_scale` before differentiation and the
    gradients unscaled; a step whose gradients hold an infinity or NaN
    changes no parameter or state and halves the scale, and after
    `scale-window` clean steps in a row the scale doubles. `log.loss_scale`
    and `log.skipped` (steps skipped so far) are printed by par-run.

    `zero=1|2|3` marks the step for ZeRO over `data-axis` (par.zero,
    par.data_axis); --par-partition applies it after propagation (--par-zero).
    With N > 1 devices on the data axis, a parameter without a user
    sharding that propagation leaves unsplit (asked on a copy of the
    forward function when other axes have more than one device) and that
    has rank 2 or more and no dim divisible by N, or fewer elements than
    N, becomes a flat argument (par.view = its shape; padded to N elements when smaller) read
    through a view marked par.view_of, so its gradient and optimizer states
    are flat too and ZeRO splits them in pieces of ceil(numel / N)
    (docs/training.md, "Flattened views").

    `bucket=SIZE` (default 25MiB): the data-parallel all-reduces (ZeRO-2/3:
    reduce-scatters) of the gradients are combined, in the order the
    backward pass makes the gradients, into buckets of at most SIZE bytes
    per device; each bucket is one collective issued right after its last
    gradient is made, so on
    a backend that runs collectives on their own stream it overlaps the
    rest of the backward pass. `bucket=0` issues one all-reduce per
    gradient. The size is recorded on the step (`par.bucket_bytes`) for
    --par-combine-collectives, the last step of --par-partition.

    ```sh
    par-opt model.mlir --par-autodiff="optimizer=adamw lr=3e-4" --mesh=dp=2,tp=4 \
        --par-propagate --par-partition --emit-program=train.parprog
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "::mlir::par::OptimizerKind",
           /*default=*/"::mlir::par::OptimizerKind::sgd",
           "none (return gradients), sgd or adamw">,
    Option<"lr", "lr", "double", /*default=*/"0.01", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "Decoupled weight decay">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"clip", "clip", "double", /*default=*/"0.0",
           "Clip the global gradient norm to this value (0: no clipping)">,
    Option<"warmup", "warmup", "int64_t", /*default=*/"0",
           "Linear learning-rate warm-up over this many steps">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "Cosine decay of the learning rate until this step (0: none)">,
    Option<"minLrRatio", "min-lr-ratio", "double", /*default=*/"0.1",
           "Learning rate at the end of the decay, relative to lr">,
    Option<"precision", "precision", "::mlir::par::Precision",
           /*default=*/"::mlir::par::Precision::fp32",
           "fp32, or bf16/fp16: low-precision compute with fp32 master "
           "weights and optimizer states">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"65536",
           "fp16: initial dynamic loss scale">,
    Option<"scaleWindow", "scale-window", "int64_t", /*default=*/"1000",
           "fp16: clean steps before the loss scale doubles">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage 0-3 over the data axis, applied by --par-partition">,
    Option<"dataAxis", "data-axis", "std::string", /*default=*/"\"dp\"",
           "The data-parallel mesh axis ZeRO splits over">,
    Option<"bucket", "bucket", "std::string", /*default=*/"\"25MiB\"",
           "Gradient all-reduces travel in buckets of up to this size, each "
           "issued when its last gradient is made (0: one per gradient)">,
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"0",
           "ZeRO stage 3: gather each layer's parameters this many layers "
           "ahead of their use, so that a backend that runs collectives "
           "asynchronously overlaps them with the layers before (0: just "
           "before the use)">,
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def RematPass : Pass<"par-remat", "::mlir::ModuleOp"> {
  let summary = "Rematerialization: what each layer of a training step keeps "
                "for the backward pass, and what it recomputes";
  let description = [{
    Runs on a training step from --par-autodiff, before --par-propagate
    and --par-partition. Each model layer (the forward ops marked
    `par.layer`) keeps, for the backward pass:

    - `none`: every forward value the backward pass reads;
    - `full`: only its input (what its ops read from outside it) and the
      values that leave it; the backward pass recomputes the rest;
    - `selective`: all but its attention core: the contraction that makes
      the scores, the softmax and what follows it up to the value product
      (Korthikanti et al.). `par.attention` keeps no scores at all (its
      gradient recomputes them from q, k and v), so on models built from
      it `selective` keeps what `none` keeps;
    - `auto[:budget=SIZE]`: per layer, whichever of the three makes the
      planned per-device peak fit the budget (default: the device memory
      of the `hardware` profile) with the fewest recomputed FLOPs. Each
      mode is measured once on a partitioned copy; an exact dynamic
      program over the chain of layers chooses; the choice is planned
      again, the target tightened by any excess until the plan fits, then
      loosened while cheaper choices still fit. A budget below anything
      feasible is an error naming the smallest planned peak.

    Recomputed ops are copies of the layer's ops placed before the first
    backward op that needs them, marked `par.recomputed` and `par.late`
    (issued just before their first use, as is the data movement the
    partitioner adds for them). The function records the choice in
    `par.remat`; `--par-report` prints it with the activation bytes of
    each layer and the recomputed FLOPs. The mode may be given alone:
    `--par-remat=full`, `--par-remat=auto:budget=600KiB`
    (docs/training.md, "Rematerialization").
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"full\"",
           "none, selective, full or auto">,
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "auto: the most planned memory per device (40GiB, 512MiB, ...); "
           "default: the hardware profile's device memory">,
    Option<"hardware", "hardware", "std::string", /*default=*/"\"\"",
           "auto without a budget: the hardware profile (a preset or JSON "
           "file) whose device memory is the budget">,
    Option<"checkpointAxis", "checkpoint-axis", "std::string",
           /*default=*/"\"\"",
           "full, auto: keep each recomputed layer's input split over this "
           "mesh axis until the backward pass (--par-split-checkpoints)">,
    Option<"fuse", "fuse", "std::string", /*default=*/"\"auto\"",
           "mode=auto, on: measure the program --par-fuse makes (its fused "
           "groups' values are registers, not buffers); off: the unfused "
           "program; auto: on where par-opt runs --par-fuse later in the "
           "same pipeline">,
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def ZeroPass : Pass<"par-zero", "::mlir::ModuleOp"> {
  let summary = "ZeRO stages 1-3 as shardings of a propagated training step";
  let description = [{
    For a function marked by `--par-autodiff=zero=N` (the first step of
    --par-partition runs this pass), after --par-propagate: the master
    weights and optimizer states get their propagated layout plus the data
    axis on one more dim (the one where it leaves the fewest elements per
    device: one that divides evenly when there is one, else a padded one,
    among the dims with at least as many elements per device as the axis
    has devices; a tensor with none stays replicated; a flat parameter,
    par.view, splits its one dim); each gradient, as
    the backward pass produces it, is constrained to that layout, so the
    partitioner reduce-scatters it (after the backward pass for stage 1, as
    soon as it is produced for stages 2 and 3) and what the step does to it
    before the update (fp16 unscaling, clipping and its norm, the
    conversion to fp32) is propagated again from the shards: it runs on
    the shard, the norm's partial sums are all-reduced as scalars; the
    working copy of the parameters is all-gathered once at the
    top of the step (stages 1, 2) or just before each use, forward and
    backward (stage 3; a flat parameter's view, the ops marked
    par.view_of, is copied after each gather). Collectives from constraints marked `par.late` are
    issued by --par-schedule just before their first use. Per step each
    rank sends 2 parameter counts of elements (stages 1, 2: reduce-scatter
    and all-gather) or 3 (stage 3: two all-gathers and a reduce-scatter).
  }];
  let options = [
    Option<"diagnose", "diagnose", "bool", /*default=*/"true",
           "Report what propagating the new layouts meets (remarks, "
           "warnings); off for copies whose diagnostics are discarded">,
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

#endif // PAR_TRANSFORMS_PASSES_TD
