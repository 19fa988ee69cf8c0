//===- Cost.h - The cost model's primitives ---------------------*- C++ -*-===//
//
// Bytes of tensors and the traffic of collectives, computed once here from
// what each op states (CollectiveOpInterface), for every report, test and
// planner.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_IR_COST_H
#define PAR_DIALECT_PAR_IR_COST_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>

namespace mlir::par {

/// Bytes of one element of an int or float type (bits rounded up).
int64_t elementBytes(Type type);
/// Bytes of a dense tensor of `shape` and `elementType`.
int64_t bytesOf(llvm::ArrayRef<int64_t> shape, Type elementType);

/// What a collective states about its traffic (CollectiveOpInterface); how
/// much of the buffer it moves and sends is the catalogue's
/// collectiveTraffic, from the op's ODS (trafficMoved, ringTraffic).
struct CollectiveTraffic {
  std::string name;  // "all_reduce sum", "all_gather", ...
  Value buffer;      // the larger of the operand and the result
  bool moves = true; // false when the attributes move nothing
  /// The part of the buffer that moves, where the attributes say (an
  /// exchange moves only what devices lack); 1 for the others.
  double fraction = 1.0;
};

/// What one rank moves for one collective op.
struct CollectiveCost {
  std::string name; // "all_reduce sum", "all_gather", ...
  std::string axes; // "[dp,tp]"
  int64_t group = 1;
  /// The larger of the op's operand and result.
  int64_t elements = 0, bytes = 0;
  /// Elements moved, counted as ZeRO does: an all-reduce is a
  /// reduce-scatter plus an all-gather (2x its buffer), a gather, scatter,
  /// all-to-all or permute moves its buffer once, an all-slice (or any
  /// collective over a group of one device) nothing.
  int64_t volume = 0;
  /// Bytes a rank sends with the bandwidth-optimal ring algorithms: an
  /// all-reduce 2(n-1)/n of its buffer, a gather, scatter or all-to-all
  /// (n-1)/n, a permute all of it.
  int64_t sent = 0;
  /// False when the attributes move nothing between devices (an exchange
  /// whose every piece is already local): the op is a local copy.
  bool moves = true;
};

/// What a compute op does on its global shapes (ShardingRuleOpInterface's
/// getWork): floating-point operations, and whether they run as a matrix
/// product (a GEMM reaches a different share of the peak than the
/// memory-bound ops). Splitting a factor of the op's rule over n devices
/// divides the FLOPs by n.
struct OpWork {
  double flops = 0;
  bool matmul = false;
};

/// The default work of a compute op: the catalogue's flopsPerElement times
/// the elements of its largest operand or result.
OpWork elementWork(Operation *op);
/// FLOPs of the compute ops nested in `root`, each op's work once.
double totalFlops(Operation *root);

/// How an op carries partial sums (LinearOpInterface): `Each` ops are linear
/// in one operand when the others are fixed (sum_i(x_i) * y = sum_i(x_i * y));
/// `All` ops are linear in all operands together (sum_i a_i + sum_i b_i =
/// sum_i(a_i + b_i)).
enum class Linearity { None, Each, All };

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_COST_H
