//===- Bubble.h - A pipelined program's bubble from measured times -*- C++
//-*-===//
//
// par-run measures a pipeline's bubble two ways. Wall clock: each rank's
// idle time (its step less the instructions it computes) over its busy
// time; that is only the schedule's bubble when every rank has a core of
// its own. Replay: the stages' instruction streams are run again on paper
// with the measured time of every instruction, each receive waiting for
// its matching send and nothing else: the bubble the schedule leaves with
// these compute times, whatever the ranks shared.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_BUBBLE_H
#define PAR_RUNTIME_BUBBLE_H

#include "par/Runtime/Program.h"

#include <vector>

namespace par::rt {

struct BubbleReplay {
  double makespan = 0;
  std::vector<double> busy; // per rank class
  /// Megatron's bubble: (makespan - busiest) / busiest.
  double bubble = 0;
};

/// Replays the rank classes of `program` with `seconds[c][i]`, the time of
/// instruction i of class c (sends and receives take none of their own).
/// Throws std::runtime_error when the streams cannot all finish (a
/// receive whose send never comes).
BubbleReplay replayPipeline(const Program &program,
                            const std::vector<std::vector<double>> &seconds);

} // namespace par::rt

#endif // PAR_RUNTIME_BUBBLE_H
