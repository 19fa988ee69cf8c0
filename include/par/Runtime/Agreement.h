//===- Agreement.h - Failures every rank agrees on --------------*- C++ -*-===//
//
// Work that may fail on some ranks and not others (loading a checkpoint,
// the steps of a save) ends in an agreement, so that no rank waits in a
// collective another rank left: every rank learns whether any failed, rank
// 0 reports the first failure once, and all exit alike without aborting.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_AGREEMENT_H
#define PAR_RUNTIME_AGREEMENT_H

#include "par/Runtime/Collectives.h"

#include <functional>
#include <stdexcept>
#include <string>

namespace par::rt {

class RunError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A failure every rank has agreed on (through Collectives::agree): rank 0
/// throws it with the message, naming the rank that failed; the other ranks
/// throw ReportedElsewhere and exit non-zero without a message, so the job
/// reports it once and nobody aborts anybody.
class AgreedError : public RunError {
public:
  using RunError::RunError;
};
class ReportedElsewhere : public AgreedError {
public:
  ReportedElsewhere() : AgreedError("") {}
};

/// Runs `fn` on every rank (collective) and agrees on the outcome: when it
/// throws on any rank, rank 0 throws AgreedError with the first failing
/// rank's message (prefixed "rank R: " when `nameRank` and the message does
/// not name it already) and how many ranks failed; the others throw
/// ReportedElsewhere.
void agreeOnErrors(Collectives &comm, const std::function<void()> &fn,
                   bool nameRank = true);

/// True when `message` starts by naming rank `rank` ("rank 3: ...",
/// "rank 3, step 2 ...", not "rank 31").
bool namesRank(const std::string &message, int64_t rank);

} // namespace par::rt

#endif // PAR_RUNTIME_AGREEMENT_H
