//===- Executor.h - Runs one rank's instruction stream ----------*- C++ -*-===//
//
// Holds the rank's arena (exactly the planned size, plus a guard region) in
// a device's memory, fills inputs (shard-invariant parameter
// initialization, per-step data) by copying them in, issues the
// instructions through the device's kernel table and the collectives, and
// applies the outputs that update parameters. It touches device memory only
// through the Device (Device.h), so each backend runs the same executor.
// Errors carry the rank, step, instruction and its source location.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_EXECUTOR_H
#define PAR_RUNTIME_EXECUTOR_H

#include "par/Runtime/Agreement.h"
#include "par/Runtime/Checkpoint.h"
#include "par/Runtime/Collectives.h"
#include "par/Runtime/DataSource.h"
#include "par/Runtime/Device.h"
#include "par/Runtime/Program.h"
#include "par/Runtime/Trace.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace par::rt {

/// Calls `fn(localIndex, globalIndex)` for every element of the box
/// `offsets + [0, localShape)` of a row-major tensor of `globalShape`; local
/// indices are row-major in a buffer of `bufferShape` (the box, or larger
/// when the buffer is padded).
template <typename Fn>
void forEachInSlice(const Shape &globalShape, const Shape &offsets,
                    const Shape &localShape, const Shape &bufferShape, Fn fn);

class Executor {
public:
  Executor(const Program &program, Device &device, Collectives &comm,
           Tracer *tracer);
  ~Executor();

  const Program &program() const { return program_; }
  const RankClass &rankClass() const { return *class_; }
  int64_t rank() const { return rank_; }

  Device &device() const { return device_; }
  /// The per-device tensor of buffer `id` in the arena (device memory).
  Tensor buffer(int64_t id) const;
  /// The tensor bound to input / output `i`; throws when this rank has none.
  Tensor input(size_t i) const;
  Tensor output(size_t i) const;

  /// Draws every parameter from (seed, parameter name, global index).
  void initParams(uint64_t seed);
  /// Reads every parameter's slice from a checkpoint (any mesh or sharding).
  void loadParams(CheckpointReader &reader);
  /// This rank's shards of the parameters it should write (one replica of
  /// each slice over the mesh).
  std::vector<ShardData> paramShards() const;
  /// Index records of every rank's shards (computed on any rank); files are
  /// named relative to the step directory, checksums left to the save.
  std::map<std::string, TensorRecord> checkpointRecords() const;

  /// True when this rank's part of input / output `i` holds a NaN or an
  /// infinity (the real elements only; false when the rank holds none).
  bool inputNonFinite(size_t i) const;
  bool outputNonFinite(size_t i) const;
  /// This rank's value of 0-d output / input `i`, if it holds it.
  std::optional<double> localScalar(size_t i) const;
  std::optional<double> inputScalar(size_t i) const;
  /// Input `i` is a parameter or optimizer state this rank holds part of.
  bool holdsParam(size_t i) const;
  /// A copy of every parameter and optimizer state this rank holds, and
  /// its restoration (to undo a step).
  using State = std::vector<std::vector<char>>;
  State saveState() const;
  void restoreState(const State &state);

  /// Fills the data inputs for `step` (1-based).
  void feedData(const DataSource &data, uint64_t seed, int64_t step);
  /// Runs the instruction stream once, then copies outputs into the
  /// parameters they update.
  void runStep(int64_t step);

  /// Highest arena byte written so far (rounded up to the alignment), from
  /// the canary the arena was filled with: the measured peak memory.
  int64_t measuredPeak() const;
  /// Device memory set aside next to the arena for the step's launches
  /// and collectives (the backend's scratch: packed GEMM operands, per-row
  /// partials, cuBLASLt's workspace, NCCL's rearranged pieces), sized from
  /// the program before the first step. Zero on the CPU backend.
  int64_t kernelScratchBytes() const { return kernelScratch_; }
  int64_t commScratchBytes() const { return commScratch_; }
  /// Global value of output `i`, assembled on rank 0 from every rank's
  /// slice (partial sums added; a flat view's padding dropped). Empty on
  /// other ranks. Collective.
  std::vector<double> gatherOutput(size_t i);

  /// What this rank's collectives moved in the last step: their number,
  /// the elements moved (an all-reduce counts as a reduce-scatter plus an
  /// all-gather, twice its buffer; an all-slice nothing) and the bytes a
  /// ring algorithm sends ((n-1)/n of the larger buffer, twice that for an
  /// all-reduce, a moving permute all of it): the compiler's --report
  /// figures, counted from the buffers actually exchanged.
  struct Traffic {
    int64_t collectives = 0, movedElements = 0, sentBytes = 0;
  };
  const Traffic &lastStepTraffic() const { return traffic_; }

  /// A pipelined program's timing on this rank, over the steps after the
  /// first (the first too when it is the only one): each instruction's
  /// shortest time (a step in which the rank waited for a core does not
  /// count), and per step on average the wall time and the busy time
  /// (every instruction but sends and receives, which wait for the other
  /// stages).
  struct SlotTiming {
    std::vector<double> seconds;
    double wall = 0, busy = 0;
    int64_t steps = 0;
  };
  /// Null unless the program is pipelined.
  const SlotTiming *slotTiming() const {
    return timed_ ? &timing_ : nullptr;
  }

private:
  void execute(const Instruction &inst, size_t index);
  /// Instructions [index, index + batch) as one launch.
  void executeBatch(size_t index);
  /// Ops that read a communicator group: collectives and axis_index.
  void runGroupOp(const Instruction &inst, size_t index,
                  const std::vector<Tensor> &inputs, Tensor &result);
  void countTraffic(const Instruction &inst, const std::vector<Tensor> &inputs,
                    const Tensor &out);
  /// A pipeline stage's send or receive (par.send, par.recv): the peer is
  /// the rank at coordinate `to`/`from` on the group's axis, all other
  /// coordinates this rank's.
  void transfer(const Instruction &inst, size_t index);
  /// Sizes the backend's scratch from every instruction and sets it aside.
  void reserveScratch();
  /// Waits for the sends whose buffer instruction `index` may reuse (all
  /// of them at the end of a step).
  void completeSends(size_t index);
  std::string where(size_t index) const;

  const Program &program_;
  Device &device_;
  Collectives &comm_;
  const KernelTable &kernels_;
  Tracer *tracer_;
  int64_t rank_;
  const RankClass *class_;
  char *arena_ = nullptr;
  int64_t allocated_ = 0;
  int64_t kernelScratch_ = 0, commScratch_ = 0;
  int64_t step_ = 0;
  Traffic traffic_;
  /// Sends in flight, with the last instruction their buffer is kept for.
  struct PendingSend {
    std::unique_ptr<Transfer> transfer;
    int64_t lastUse;
    std::string what;
  };
  std::vector<PendingSend> sends_;
  bool timed_ = false;
  int64_t stepsRun_ = 0;
  SlotTiming timing_;
};

template <typename Fn>
void forEachInSlice(const Shape &globalShape, const Shape &offsets,
                    const Shape &localShape, const Shape &bufferShape, Fn fn) {
  int64_t count = numElements(localShape);
  if (count == 0)
    return;
  size_t rank = globalShape.size();
  std::vector<int64_t> index(rank, 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t global = 0, local = 0;
    for (size_t d = 0; d < rank; ++d) {
      global = global * globalShape[d] + offsets[d] + index[d];
      local = local * bufferShape[d] + index[d];
    }
    fn(local, global);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < localShape[d])
        break;
      index[d] = 0;
    }
  }
}

} // namespace par::rt

#endif // PAR_RUNTIME_EXECUTOR_H
