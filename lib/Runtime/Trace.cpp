//===- Trace.cpp - Chrome trace events ------------------------------------===//

#include "par/Runtime/Trace.h"
#include "par/Runtime/FileIO.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace par::rt {

static double wallMicros() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Tracer::Tracer(int64_t rank) : rank_(rank), origin_(wallMicros()) {}

double Tracer::now() const { return wallMicros() - origin_; }

void Tracer::record(const std::string &name, Track track, double startUs,
                    double endUs, int64_t step, const std::string &loc) {
  nlohmann::json event = {{"name", name},
                          {"cat", track == Communication ? "comm"
                                  : track == Schedule    ? "slot"
                                                         : "compute"},
                          {"ph", "X"},
                          {"pid", rank_},
                          {"tid", int(track)},
                          {"ts", startUs},
                          {"dur", endUs - startUs},
                          {"args", {{"step", step}}}};
  if (!loc.empty())
    event["args"]["loc"] = loc;
  events_.push_back(
      event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string Tracer::serialize() const {
  using json = nlohmann::json;
  std::string text = json{{"name", "process_name"},
                          {"ph", "M"},
                          {"pid", rank_},
                          {"args", {{"name", "rank " + std::to_string(rank_)}}}}
                         .dump();
  const char *tracks[] = {"compute", "communication", "host", "schedule"};
  for (int t = 0; t < 4; ++t)
    text += "," + json{{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", rank_},
                       {"tid", t},
                       {"args", {{"name", tracks[t]}}}}
                      .dump();
  for (const std::string &event : events_)
    text += ",\n" + event;
  return text;
}

void Tracer::write(const std::string &path,
                   const std::vector<std::string> &ranks) {
  std::string text = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  for (size_t r = 0; r < ranks.size(); ++r)
    text += (r ? ",\n" : "") + ranks[r];
  text += "\n]}\n";
  try {
    writeFileAtomically(path, {{text.data(), text.size()}}, "trace");
  } catch (const FileError &e) {
    throw std::runtime_error(std::string("--trace: ") + e.what());
  }
}

} // namespace par::rt
