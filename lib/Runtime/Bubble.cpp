//===- Bubble.cpp - A pipelined program's bubble from measured times ------===//

#include "par/Runtime/Bubble.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace par::rt {

BubbleReplay replayPipeline(const Program &program,
                            const std::vector<std::vector<double>> &seconds) {
  size_t classes = program.rankClasses.size();
  if (seconds.size() != classes)
    throw std::runtime_error("bubble replay: times for " +
                             std::to_string(seconds.size()) + " of " +
                             std::to_string(classes) + " rank classes");
  for (size_t c = 0; c < classes; ++c)
    if (seconds[c].size() != program.rankClasses[c].instructions.size())
      throw std::runtime_error(
          "bubble replay: rank class " + std::to_string(c) + " has " +
          std::to_string(seconds[c].size()) + " times for " +
          std::to_string(program.rankClasses[c].instructions.size()) +
          " instructions");
  BubbleReplay result;
  result.busy.assign(classes, 0.0);
  std::vector<double> clock(classes, 0.0);
  std::vector<size_t> next(classes, 0);
  std::map<int64_t, double> sentAt; // channel -> when its send was issued
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t c = 0; c < classes; ++c) {
      const std::vector<Instruction> &insts =
          program.rankClasses[c].instructions;
      for (; next[c] < insts.size(); ++next[c]) {
        const Instruction &inst = insts[next[c]];
        if (inst.op == OpCode::Send) {
          sentAt[inst.attrs.channel] = clock[c];
        } else if (inst.op == OpCode::Recv) {
          auto it = sentAt.find(inst.attrs.channel);
          if (it == sentAt.end())
            break;
          clock[c] = std::max(clock[c], it->second);
        } else {
          clock[c] += seconds[c][next[c]];
          result.busy[c] += seconds[c][next[c]];
        }
        progress = true;
      }
    }
  }
  for (size_t c = 0; c < classes; ++c)
    if (next[c] < program.rankClasses[c].instructions.size())
      throw std::runtime_error("bubble replay: rank class " +
                               std::to_string(c) + " waits at instruction " +
                               std::to_string(next[c]) +
                               " for a send that never comes");
  result.makespan = *std::max_element(clock.begin(), clock.end());
  double busiest = *std::max_element(result.busy.begin(), result.busy.end());
  result.bubble = busiest > 0 ? (result.makespan - busiest) / busiest : 0;
  return result;
}

} // namespace par::rt
