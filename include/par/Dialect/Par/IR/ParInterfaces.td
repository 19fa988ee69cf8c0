//===- ParInterfaces.td - par op interfaces ----------------*- tablegen -*-===//
#ifndef PAR_INTERFACES_TD
#define PAR_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Par_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::par";
  let description = [{
    Implemented by every compute op: returns the op's einsum-like factor
    mapping (see `ShardingRule`). The rule is the single source of truth about
    how an op may be split; propagation, partitioning, the cost model and
    auto-sharding read it and never special-case ops.
  }];
  let methods = [
    InterfaceMethod<
      "Returns the factor mapping of this op's operands and results.",
      "::mlir::par::ShardingRule", "getShardingRule", (ins)>,
    InterfaceMethod<[{
      The op's work on global shapes (Cost.h): FLOPs, and whether they run
      as a matrix product. Splitting a factor of the rule over n devices
      divides it by n. By default the catalogue's `flopsPerElement` times
      the elements of the op's largest tensor.
    }], "::mlir::par::OpWork", "getWork", (ins), "",
      "return ::mlir::par::elementWork($_op);">,
    InterfaceMethod<[{
      Whether one run of the op reads only a result's worth of operand
      `index` (as many elements as its result has, at most the whole
      operand: a slice its window, a gather or lookup the rows it
      returns), not all of it; false by default. The cost model counts the
      bytes it moves from this, on whatever shapes it prices (global, or
      a device's piece).
    }], "bool", "readsResultWorth", (ins "unsigned":$index), "",
      "return false;">,
  ];
}

def Par_LocalFormOpInterface : OpInterface<"LocalFormOpInterface"> {
  let cppNamespace = "::mlir::par";
  let description = [{
    Implemented by ops whose per-device form is more than the same op on
    per-device types (--par-to-local sets those first): ids shifted to a
    shard's rows, padding masked with a reduction's identity, a mean scaled
    to this device's share, collectives inside a vocabulary-parallel loss.
    The context (LocalForm.h) knows every value's global type and sharding.
  }];
  let methods = [
    InterfaceMethod<
      "Rewrites the op into its per-device form; its results already have "
      "their per-device types.",
      "::mlir::LogicalResult", "localize",
      (ins "::mlir::par::LocalFormContext &":$context)>,
  ];
}

def Par_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::par";
  let description = [{
    Ops that run over communicator groups of mesh axes (the devices that
    differ only in `axes`). Each states its traffic: the buffer that is
    moved and how many times (elements moved, counted as ZeRO does) and
    what share of it a rank sends with the bandwidth-optimal ring
    algorithms. `getCost` (Cost.h) turns that into the one collective cost
    that --par-comm-report, --report and the planners read.
  }];
  let methods = [
    InterfaceMethod<"The mesh the groups are taken from.",
      "::mlir::FlatSymbolRefAttr", "getMeshAttr">,
    InterfaceMethod<"The mesh axes that form each group.",
      "::mlir::ArrayAttr", "getAxes">,
    InterfaceMethod<"Devices per group (-1 when the mesh is unknown).",
      "int64_t", "getGroupSize">,
    InterfaceMethod<[{
      The traffic of one call on one rank of a group of `groupSize`: the
      name shown in reports, the buffer whose size it scales, the elements
      moved and the share of the buffer's bytes sent, both as multiples of
      the buffer.
    }], "::mlir::par::CollectiveTraffic", "getTraffic", (ins "int64_t":$groupSize)>,
  ];
  let extraClassDeclaration = [{
    /// This op's cost per rank and call (Cost.h); a group of one device
    /// moves nothing.
    ::mlir::par::CollectiveCost getCost();
    /// Whether devices exchange data (the ODS `communicates` bit, through
    /// the catalogue: an all_slice only cuts its own piece).
    bool communicates();
  }];
}

def Par_LinearOpInterface : OpInterface<"LinearOpInterface"> {
  let cppNamespace = "::mlir::par";
  let description = [{
    Ops through which partial sums travel: f(sum_i x_i) = sum_i f(x_i).
    --par-sink-partials resolves a partial sum after such an op instead of
    before it. Most are linear in each operand with the others fixed (the
    default); a sum is linear in all operands together.
  }];
  let methods = [
    InterfaceMethod<"How the op is linear in operand `operand`.",
      "::mlir::par::Linearity", "getLinearity", (ins "unsigned":$operand), "",
      "return ::mlir::par::Linearity::Each;">,
  ];
}

def Par_OptimizerUpdateOpInterface : OpInterface<"OptimizerUpdateOpInterface"> {
  let cppNamespace = "::mlir::par";
  let description = [{
    One optimizer update of a parameter: the master weight, the gradient it
    applies, the optimizer states it keeps (each the master's type, each
    replaced by a result) and the updated master. ZeRO splits the master and
    the states, --report counts them, and the gradient is where the
    backward pass's result is consumed.
  }];
  let methods = [
    InterfaceMethod<"The master weight updated.", "::mlir::Value", "getParam">,
    InterfaceMethod<"The gradient the update applies.", "::mlir::Value", "getGrad">,
    InterfaceMethod<"The optimizer states read (moments, momentum buffer).",
      "::llvm::SmallVector<::mlir::Value>", "getStates">,
    InterfaceMethod<"The updated master weight.", "::mlir::Value", "getNewParam">,
    InterfaceMethod<"The updated states, in the order of getStates.",
      "::llvm::SmallVector<::mlir::Value>", "getNewStates">,
  ];
}

def Par_DataOperandOpInterface : OpInterface<"DataOperandOpInterface"> {
  let cppNamespace = "::mlir::par";
  let description = [{
    Ops that read integer data the runtime must feed: the token ids of an
    embedding, the next-token targets of a loss. The runtime's data feed
    for a function argument follows from the op that reads it (see
    StepArguments.h), unless the argument says `par.data` itself.
  }];
  let methods = [
    InterfaceMethod<[{
      The operand that holds token data, its kind ("tokens" or "targets")
      and the vocabulary it ranges over; none when the op reads no such
      data.
    }], "std::optional<::mlir::par::DataOperand>", "getDataOperand">,
  ];
}

// An op whose kernels may write a result over an operand of the same size:
// each element is read before the same element is written (element-by-element
// ops, optimizer updates). The memory planner lets such a result take over a
// dead operand's buffer; par-run's loader checks the same trait through the
// generated catalogue.
def Par_InPlace : NativeOpTrait<"InPlace"> {
  let cppNamespace = "::mlir::par::OpTrait";
}

#endif // PAR_INTERFACES_TD
