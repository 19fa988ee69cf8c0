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

// An op whose kernels may write a result over an operand of the same size:
// each element is read before the same element is written (element-by-element
// ops, optimizer updates). The memory planner lets such a result take over a
// dead operand's buffer; par-run's loader checks the same trait through the
// generated catalogue.
def Par_InPlace : NativeOpTrait<"InPlace"> {
  let cppNamespace = "::mlir::par::OpTrait";
}

#endif // PAR_INTERFACES_TD
