//===- MpiCollectives.h - Collectives over MPI ------------------*- C++ -*-===//
//
// One MPI communicator per program group (MPI_Comm_split of the world by
// the coordinates on the other mesh axes, ordered by the member index).
// Every call is non-blocking and waited on by a watchdog: a collective that
// does not complete within the timeout raises CommError naming it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COMM_MPICOLLECTIVES_H
#define PAR_RUNTIME_COMM_MPICOLLECTIVES_H

#include "par/Runtime/Collectives.h"
#include "par/Runtime/Program.h"

#include <memory>

namespace par::rt {

/// Initializes MPI (idempotent) and returns (rank, size) of the world.
std::pair<int, int> initMpi(int *argc, char ***argv);
void finalizeMpi();
/// Ends every rank of the job with `code` (MPI_Abort).
[[noreturn]] void abortMpi(int code);
/// False in a runtime built without MPI (Comm/LocalCollectives.cpp): one
/// rank, started directly.
bool mpiBuiltIn();

/// Collectives for `program`'s groups on this rank. `timeoutSeconds` <= 0
/// waits forever.
std::unique_ptr<Collectives> createMpiCollectives(const Program &program,
                                                  double timeoutSeconds);

} // namespace par::rt

#endif // PAR_RUNTIME_COMM_MPICOLLECTIVES_H
