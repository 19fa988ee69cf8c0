//===- Collectives.h - Communication between the ranks of a mesh -*- C++
//-*-===//
//
// The executor talks to other ranks only through this interface, one
// communicator per group of mesh axes listed in the program. Group members
// are numbered row-major over the group's axes (first axis major), as the
// compiler numbers them. Semantics follow the par collective ops.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COLLECTIVES_H
#define PAR_RUNTIME_COLLECTIVES_H

#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/Tensor.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace par::rt {

/// A failed or timed-out communication call; the message names the call,
/// the rank, and what was running (collective, step, group).
class CommError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What is running, for messages: set by the executor before each call.
struct CommContext {
  int64_t step = 0;
  int64_t instruction = -1;
  std::string what; // "all_reduce over [tp] at model.mlir:9:8"
};

/// How reducing collectives combine the ranks' values (par.all_reduce's
/// kind, from the catalogue).
using ReduceOp = catalogue::CollectiveKind;

/// A point-to-point transfer in flight (Collectives::send, recv). wait()
/// returns once it completed, raising CommError past the watchdog's
/// timeout; the tensor's memory must stay as it is until then. A transfer
/// dropped before it completed is cancelled.
class Transfer {
public:
  virtual ~Transfer() = default;
  virtual void wait() = 0;
};

class Collectives {
public:
  virtual ~Collectives() = default;

  virtual int64_t worldRank() const = 0;
  virtual int64_t worldSize() const = 0;
  /// This rank's index in `group`, and the group's size.
  virtual int64_t memberIndex(int64_t group) const = 0;
  virtual int64_t memberCount(int64_t group) const = 0;
  /// The sizes of the group's axes, in the group's order.
  virtual std::vector<int64_t> memberShape(int64_t group) const = 0;

  // Each collective is issued on `stream` (the device's communication
  // stream; null where work runs when called, as on the CPU backend).
  virtual void allReduce(int64_t group, ReduceOp kind, const Tensor &input,
                         Tensor &out, Stream stream) = 0;
  virtual void allGather(int64_t group, int64_t dim, const Tensor &input,
                         Tensor &out, Stream stream) = 0;
  virtual void reduceScatter(int64_t group, ReduceOp kind, int64_t dim,
                             const Tensor &input, Tensor &out,
                             Stream stream) = 0;
  virtual void allToAll(int64_t group, int64_t splitDim, int64_t concatDim,
                        const Tensor &input, Tensor &out, Stream stream) = 0;
  /// (source, target) member pairs; members that are no target get zeros.
  virtual void permute(int64_t group,
                       const std::vector<std::pair<int64_t, int64_t>> &pairs,
                       const Tensor &input, Tensor &out, Stream stream) = 0;
  /// Every member sends `sendBytes[j]` bytes to member j, taken one after
  /// another from `send` in member order, and receives `receiveBytes[j]`
  /// bytes from member j into `receive` likewise (par.exchange; host
  /// memory). Both sides know every count.
  virtual void exchange(int64_t group, const std::vector<int64_t> &sendBytes,
                        const void *send,
                        const std::vector<int64_t> &receiveBytes,
                        void *receive) = 0;
  /// Non-blocking point-to-point transfers between world ranks, matched
  /// by `tag` (pipeline stages send activations forward and their
  /// gradients backward): both return at once.
  virtual std::unique_ptr<Transfer> send(int64_t toRank, int64_t tag,
                                         const Tensor &input) = 0;
  virtual std::unique_ptr<Transfer> recv(int64_t fromRank, int64_t tag,
                                         Tensor &out) = 0;
  /// Every rank's bytes, in rank order, on rank 0 (empty elsewhere).
  virtual std::vector<std::string> gatherToRoot(const std::string &bytes) = 0;
  virtual void barrier() = 0;
  /// Every rank's `values` reduced elementwise over all ranks (Sum, Max or
  /// Min), in place: the small agreements every rank must act on alike
  /// (a save's id, whether a step was finite, whether a save failed).
  virtual void agree(std::vector<int64_t> &values, ReduceOp kind) = 0;

  /// Device memory the group op `op` needs besides its operand and result
  /// (NCCL's collectives: pieces rearranged into whole blocks), from their
  /// shapes alone. Zero where collectives work in host memory.
  virtual size_t scratchBytes(catalogue::OpCode op,
                              const catalogue::Attrs &attrs,
                              const Tensor &input, const Tensor &out) const {
    (void)op, (void)attrs, (void)input, (void)out;
    return 0;
  }
  /// Sets aside `bytes` of that scratch (the most of any one collective:
  /// they run one after another) before the first step.
  virtual void reserveScratch(size_t bytes) { (void)bytes; }

  CommContext context;
};

/// Piece `j` of `n` equal pieces of `input` along `dim`, for every j, laid
/// out one piece after another (each row-major in its own shape).
void splitPieces(const Tensor &input, int64_t dim, int64_t n, void *pieces);
/// The inverse: concatenates `n` consecutive pieces along `dim` into `out`.
void joinPieces(const void *pieces, int64_t n, int64_t dim, Tensor &out);

} // namespace par::rt

#endif // PAR_RUNTIME_COLLECTIVES_H
