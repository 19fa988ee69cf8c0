//===- CostModel.h - predicted step time of a plan on a machine -*- C++ -*-===//
//
// One cost model for --report, --auto-shard and the benchmarks: FLOPs from
// each op's work (ShardingRuleOpInterface::getWork, split by the factors a
// plan shards), bytes from the reshard planner and the collectives' one
// traffic formula, and seconds from a hardware profile (alpha-beta links,
// peak FLOP/s, memory bandwidth). docs/auto-shard.md states the formulas.
//
//===----------------------------------------------------------------------===//
#ifndef PAR_TRANSFORMS_COSTMODEL_H
#define PAR_TRANSFORMS_COSTMODEL_H

#include "par/Dialect/Par/IR/Cost.h"
#include "par/Runtime/HardwareProfile.h"
#include "par/Transforms/ReportFormat.h"
#include "par/Transforms/ReshardPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::par {

/// A bucket a collective travels in: the step's bucket size
/// (par.bucket_bytes) and the rank of the value (a gradient, or a
/// parameter's shard).
struct Bucket {
  int64_t bytes = 0;
  int64_t rank = 1;
  /// What travels in it: the value's gathers (a parameter) or its
  /// reductions (a gradient).
  bool gathers = false;

  /// Whether a reshard step of this kind is one that travels in it (for a
  /// value smaller than the bucket).
  bool carries(ReshardStepKind kind) const {
    return gathers ? kind == ReshardStepKind::AllGather
                   : kind == ReshardStepKind::AllReduce ||
                         kind == ReshardStepKind::ReduceScatter;
  }
};

/// A hardware profile bound to the axes of one mesh: which link level each
/// axis's groups span.
class MachineModel {
public:
  MachineModel(::par::rt::HardwareProfile profile,
               ArrayRef<int64_t> axisSizes);

  /// The profile named `nameOrPath` (a preset or a JSON file; the default
  /// preset when empty), or an error through `emitError`.
  static FailureOr<MachineModel>
  load(StringRef nameOrPath, ArrayRef<int64_t> axisSizes,
       function_ref<InFlightDiagnostic()> emitError);

  const ::par::rt::HardwareProfile &profile() const { return hw; }
  ArrayRef<int64_t> axisSizes() const { return sizes; }
  /// The link level (0: inside a node) the groups of mesh axis `axis`
  /// span.
  size_t axisLevel(int32_t axis) const { return levels[axis]; }
  int64_t numDevices() const;

  /// Peak FLOP/s for `elementType` (the f32 peak for types the profile
  /// does not list, such as integers).
  double peakFlops(Type elementType) const;
  /// Seconds a device spends on `work` (already its share) touching
  /// `bytes`: a matrix product at the GEMM share of the peak, any other op
  /// at the larger of its FLOPs at the memory-bound share of the peak and
  /// its bytes at the memory-bound share of the bandwidth; plus the
  /// profile's overhead of a kernel unless the op runs inside another's
  /// (a member of a fused group but its root).
  double computeSeconds(const OpWork &work, double bytes, Type elementType,
                        bool ownKernel = true) const;
  /// Seconds of one collective `name` (all_reduce, all_gather,
  /// reduce_scatter, all_to_all, collective_permute, exchange) over the
  /// mesh axes `axes`, with a per-device buffer of `bufferBytes` of which a
  /// rank sends `sentBytes`. Groups that span several axes run at the
  /// slowest level among them. An all_slice sends nothing: each device
  /// copies its piece of the buffer, priced as a memory-bound op.
  /// `latencyShare` of a ring collective's latency is counted (one in a
  /// bucket pays its share of the bucket's).
  double collectiveSeconds(StringRef name, ArrayRef<int32_t> axes,
                           double bufferBytes, double sentBytes,
                           double latencyShare = 1.0) const;
  /// Seconds of every step of a planned reshard (reshardCost's steps).
  /// With `bucket`, a value of that rank whose reductions (a gradient) or
  /// gathers (a parameter) travel in the step's buckets
  /// (--par-combine-collectives).
  double reshardSeconds(const ReshardCost &cost,
                        const Bucket *bucket = nullptr) const;
  /// Seconds of a collective (all_reduce, reduce_scatter, all_gather) of
  /// `bufferBytes` per device over `axes` when it travels in `bucket`
  /// (--par-combine-collectives): its share of the bucket's latency, by
  /// its bytes, its bandwidth, and the copies that pack it into the bucket
  /// and cut it out again (reshaped, concatenated, sliced, reshaped back).
  /// One as large as the bucket travels alone, as a plain collective.
  /// A gather or reduce-scatter along an inner dim (`innerDim`) is
  /// transposed too.
  double bucketedSeconds(StringRef name, ArrayRef<int32_t> axes,
                         double bufferBytes, double sentBytes,
                         const Bucket &bucket, bool innerDim = false) const;

private:
  /// The devices of a group over `axes` at each link level it spans
  /// (index: the level; the last is the slowest it spans).
  std::vector<int64_t> devicesPerLevel(ArrayRef<int32_t> axes) const;

  ::par::rt::HardwareProfile hw;
  SmallVector<int64_t> sizes;
  std::vector<size_t> levels;
};

/// What one call of a partitioned function costs a device.
struct StepPrediction {
  double computeSeconds = 0, commSeconds = 0, exposedCommSeconds = 0;
  double stepSeconds = 0;
  /// FLOPs one device runs, and the FLOPs of the model on global shapes
  /// (the partitioner's par.model_flops), for MFU.
  double deviceFlops = 0, modelFlops = 0;
  /// Model FLOPs over (step time x devices x peak); 0 when unknown.
  double mfu = 0;
  int64_t collectives = 0, sentBytes = 0;
};

/// Predicts one call of `func`, a partitioned function (per-device types,
/// explicit collectives), on `machine`. Collectives run in program order
/// between compute ops (par-run's CPU backend), so all communication is
/// exposed.
StepPrediction predictStep(func::FuncOp func, const MachineModel &machine);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_COSTMODEL_H
