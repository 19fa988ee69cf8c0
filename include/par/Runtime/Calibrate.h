//===- Calibrate.h - measure this machine into a hardware profile -*- C++ -*-===//
//
// `par-run --calibrate -np N -o FILE`: every rank measures at once (so the
// figures are those of N busy ranks, as a run sees them) the GEMM rate of
// the runtime's dot kernel per float type, the bandwidth of a large
// element-wise op, the cost of a tiny op, and over all ranks the time of
// each collective at message sizes from 4 KiB up; a least-squares line
// through the collective times gives the link's latency and bandwidth (from
// all_reduce) and each other collective's algorithm factor. The result is a
// hardware profile (HardwareProfile.h) the planner reads like a preset.
//
//===----------------------------------------------------------------------===//
#ifndef PAR_RUNTIME_CALIBRATE_H
#define PAR_RUNTIME_CALIBRATE_H

#include "par/Runtime/Collectives.h"
#include "par/Runtime/HardwareProfile.h"
#include "par/Runtime/Program.h"

#include <ostream>

namespace par::rt {

struct CalibrationOptions {
  /// Seconds each measurement repeats for (the best repeat counts).
  double minSeconds = 0.2;
  /// The largest collective message, bytes per rank.
  int64_t maxBytes = int64_t(16) << 20;
  /// The profile's name and description.
  std::string name = "calibrated";
};

/// The smallest program the runtime accepts for `ranks` ranks: one axis
/// "x" over all of them, one group over it, nothing to run.
Program worldProgram(int ranks);

/// Measures on every rank of `comm`'s world (call on all of them); every
/// rank returns the same profile. `log` (rank 0's, or null) receives a
/// table of what was measured.
HardwareProfile calibrate(Collectives &comm, const CalibrationOptions &options,
                          std::ostream *log);

} // namespace par::rt

#endif // PAR_RUNTIME_CALIBRATE_H
