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

// An op whose kernels may write a result over an operand of the same size:
// each element is read before the same element is written (element-by-element
// ops, optimizer updates). The memory planner lets such a result take over a
// dead operand's buffer; par-run's loader checks the same trait through the
// generated catalogue.
def Par_InPlace : NativeOpTrait<"InPlace"> {
  let cppNamespace = "::mlir::par::OpTrait";
}

#endif // PAR_INTERFACES_TD
