//===- Trace.h - Chrome trace events ----------------------------*- C++ -*-===//
//
// Each rank records complete ("X") events on its tracks (compute,
// communication, host, and a pipelined program's schedule slots); rank 0 merges every rank's events into one Chrome
// trace-event JSON file (one process per rank) that Perfetto and
// chrome://tracing open.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_TRACE_H
#define PAR_RUNTIME_TRACE_H

#include <cstdint>
#include <string>
#include <vector>

namespace par::rt {

class Tracer {
public:
  /// Schedule: a pipelined program's slots (F3, B3, W3), each from the
  /// first to the last instruction of its run.
  enum Track { Compute = 0, Communication = 1, Host = 2, Schedule = 3 };

  explicit Tracer(int64_t rank);
  /// Microseconds since this tracer was made.
  double now() const;
  void record(const std::string &name, Track track, double startUs,
              double endUs, int64_t step, const std::string &loc = "");
  size_t size() const { return events_.size(); }
  /// This rank's events as a JSON array body (no brackets), with the
  /// process and thread names.
  std::string serialize() const;
  /// Writes the merged trace; throws std::runtime_error naming the path.
  static void write(const std::string &path,
                    const std::vector<std::string> &ranks);

private:
  int64_t rank_;
  double origin_;
  std::vector<std::string> events_;
};

} // namespace par::rt

#endif // PAR_RUNTIME_TRACE_H
