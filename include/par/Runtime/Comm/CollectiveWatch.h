//===- CollectiveWatch.h - The watchdog of asynchronous collectives -*- C++
//-*-===//
//
// A library whose collectives return before they complete (NCCL: the call
// only enqueues the work on the communication stream) cannot time them
// out where they are called. The backend instead notes each one as it is
// issued, with a completion token (a CUDA event) and what to call it, and
// polls the watch while the host waits for the device: completed entries
// are dropped in order, and the oldest one still running past the timeout
// is an error that names the rank, step, instruction and call, instead of
// a wait that never ends. Kept free of any device API so that it is tested
// on the host.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COMM_COLLECTIVEWATCH_H
#define PAR_RUNTIME_COMM_COLLECTIVEWATCH_H

#include "par/Runtime/Collectives.h"

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

namespace par::rt {

template <typename Token> class CollectiveWatch {
public:
  /// `timeoutSeconds` <= 0: never time out (the entries are still dropped
  /// as they complete).
  explicit CollectiveWatch(double timeoutSeconds) : timeout_(timeoutSeconds) {}

  /// A collective issued at `now` (seconds on any steady clock), to be
  /// complete when `token` is: `call` is the library's ("ncclAllReduce"),
  /// `rank` and `context` the executor's, which name it in an error.
  void issued(Token token, const char *call, int64_t rank,
              const CommContext &context, double now) {
    std::string where = "rank " + std::to_string(rank);
    if (context.step)
      where += ", step " + std::to_string(context.step);
    if (!context.what.empty())
      where += ", " + context.what;
    entries_.push_back({std::move(token), where + ": " + call, now});
  }

  /// Drops the completed entries, oldest first (`done(token)` says whether
  /// one completed; `release(token)` takes each dropped token back), up to
  /// the first that has not. Throws CommError when that one has run
  /// longer than the timeout; the entries stay, so a caller that goes on
  /// waiting is told again.
  template <typename Done, typename Release>
  void poll(double now, Done &&done, Release &&release) {
    while (!entries_.empty() && done(entries_.front().token)) {
      release(std::move(entries_.front().token));
      entries_.pop_front();
    }
    if (entries_.empty() || timeout_ <= 0)
      return;
    const Entry &oldest = entries_.front();
    if (now - oldest.issued <= timeout_)
      return;
    throw CommError(oldest.what + " did not complete within " +
                    std::to_string(int64_t(timeout_)) +
                    " s (--timeout): a member of its group stalled or failed" +
                    (entries_.size() > 1
                         ? " (" + std::to_string(entries_.size() - 1) +
                               " later collective(s) wait behind it)"
                         : std::string()));
  }

  size_t inFlight() const { return entries_.size(); }

  /// Every token, taken back without waiting (the communicators were
  /// aborted, or the device is gone).
  template <typename Release> void clear(Release &&release) {
    for (Entry &entry : entries_)
      release(std::move(entry.token));
    entries_.clear();
  }

private:
  struct Entry {
    Token token;
    std::string what;
    double issued;
  };
  std::deque<Entry> entries_;
  double timeout_;
};

} // namespace par::rt

#endif // PAR_RUNTIME_COMM_COLLECTIVEWATCH_H
