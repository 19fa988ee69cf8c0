//===- MpiCollectives.cpp - Collectives over MPI --------------------------===//

#include "par/Runtime/Comm/MpiCollectives.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <thread>

namespace par::rt {

std::pair<int, int> initMpi(int *argc, char ***argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    MPI_Init(argc, argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return {rank, size};
}

void finalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

bool mpiBuiltIn() { return true; }

void abortMpi(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

namespace {

/// What a wait is for: a collective of a group, a world collective or a
/// transfer with one peer; `seq` counts such calls on this rank.
struct Waiting {
  enum Kind : int64_t { Group, World, Peer } kind = World;
  int64_t target = 0; // group index or peer rank
  int64_t seq = 0;
};

constexpr int kReportTag = 1;
constexpr int kReportWords = 7;

/// What a rank tells the others when its watchdog fires (timedOut), or,
/// on hearing such a report while it waits itself, that it is alive and
/// waiting (not timedOut): what it waits for, when it started waiting and
/// when it reported (microseconds since the epoch: ranks on different
/// hosts share wall-clock time, not a steady clock). Only timed-out
/// reports name culprits or make a rank the late one; any report proves
/// its rank alive.
struct Report {
  int rank = 0;
  Waiting waiting;
  int64_t step = 0;
  int64_t waitStartUs = 0, giveUpUs = 0;
  bool timedOut = true;

  std::array<int64_t, kReportWords> encode() const {
    return {int64_t(waiting.kind),
            waiting.target,
            waiting.seq,
            step,
            waitStartUs,
            giveUpUs,
            timedOut ? 1 : 0};
  }
  static Report decode(int rank, const std::array<int64_t, kReportWords> &w) {
    Report r;
    r.rank = rank;
    int64_t kind = w[0];
    r.waiting.kind = kind == Waiting::Group  ? Waiting::Group
                     : kind == Waiting::Peer ? Waiting::Peer
                                             : Waiting::World;
    r.waiting.target = w[1];
    r.waiting.seq = w[2];
    r.step = w[3];
    r.waitStartUs = w[4];
    r.giveUpUs = w[5];
    r.timedOut = w[6] != 0;
    return r;
  }
};

int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class MpiCollectives : public Collectives {
public:
  MpiCollectives(const Program &program, double timeout) : timeout_(timeout) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Color: coordinates on the axes outside the group; key: index inside.
    auto colorOf = [&](const std::vector<std::string> &axes,
                       const std::vector<int64_t> &coords) {
      int64_t color = 0;
      for (size_t a = 0; a < program.mesh.size(); ++a) {
        bool inGroup = false;
        for (const std::string &axis : axes)
          inGroup |= program.mesh[a].name == axis;
        if (!inGroup)
          color = color * program.mesh[a].size + coords[a];
      }
      return color;
    };
    std::vector<int64_t> coords = meshCoords(program, rank_);
    for (const std::vector<std::string> &axes : program.groups) {
      int64_t color = colorOf(axes, coords);
      // Every rank's color, to know whom another member's report waits for.
      colors_.emplace_back();
      if (int64_t(size_) == program.numRanks)
        for (int r = 0; r < size_; ++r)
          colors_.back().push_back(colorOf(axes, meshCoords(program, r)));
      int64_t index = groupIndex(program, coords, axes);
      MPI_Comm comm;
      check(MPI_Comm_split(MPI_COMM_WORLD, int(color), int(index), &comm),
            "MPI_Comm_split");
      MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
      comms_.push_back(comm);
      indices_.push_back(index);
      sizes_.push_back(groupSize(program, axes));
      shapes_.emplace_back();
      for (const std::string &axis : axes)
        shapes_.back().push_back(
            program.mesh[size_t(program.axisIndex(axis))].size);
    }
    seqs_.assign(comms_.size(), 0);
    // The watchdog's reports travel on their own communicator, so they can
    // never match a transfer of the program.
    check(MPI_Comm_dup(MPI_COMM_WORLD, &watch_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(watch_, MPI_ERRORS_RETURN);
  }
  ~MpiCollectives() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    for (MPI_Comm &comm : comms_)
      MPI_Comm_free(&comm);
    MPI_Comm_free(&watch_);
  }

  int64_t worldRank() const override { return rank_; }
  int64_t worldSize() const override { return size_; }
  int64_t memberIndex(int64_t group) const override {
    return indices_.at(group);
  }
  int64_t memberCount(int64_t group) const override { return sizes_.at(group); }
  std::vector<int64_t> memberShape(int64_t group) const override {
    return shapes_.at(group);
  }

  // MPI runs on the host: the stream is null and work is done on return.
  void allReduce(int64_t group, ReduceOp kind, const Tensor &input, Tensor &out,
                 Stream) override {
    Reduction r(input, kind, *this);
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, r.data(), int(input.size()), r.type,
                         r.op, comms_[group], &request),
          "MPI_Iallreduce");
    wait(&request, 1, "MPI_Iallreduce", onGroup(group));
    r.store(out);
  }

  void allGather(int64_t group, int64_t dim, const Tensor &input, Tensor &out,
                 Stream) override {
    int64_t n = sizes_[group];
    std::vector<char> pieces(input.bytes() * n);
    MPI_Request request;
    checkCount(input.bytes());
    check(MPI_Iallgather(input.data, int(input.bytes()), MPI_BYTE,
                         pieces.data(), int(input.bytes()), MPI_BYTE,
                         comms_[group], &request),
          "MPI_Iallgather");
    wait(&request, 1, "MPI_Iallgather", onGroup(group));
    joinPieces(pieces.data(), n, dim, out);
  }

  void reduceScatter(int64_t group, ReduceOp kind, int64_t dim,
                     const Tensor &input, Tensor &out, Stream) override {
    int64_t n = sizes_[group];
    std::vector<char> pieces(input.bytes());
    splitPieces(input, dim, n, pieces.data());
    Tensor packed{input.dtype, input.shape, pieces.data()};
    Reduction r(packed, kind, *this);
    std::vector<char> result(r.elementBytes() * out.size());
    MPI_Request request;
    check(MPI_Ireduce_scatter_block(r.data(), result.data(), int(out.size()),
                                    r.type, r.op, comms_[group], &request),
          "MPI_Ireduce_scatter_block");
    wait(&request, 1, "MPI_Ireduce_scatter_block", onGroup(group));
    r.storeFrom(result.data(), out);
  }

  void allToAll(int64_t group, int64_t splitDim, int64_t concatDim,
                const Tensor &input, Tensor &out, Stream) override {
    int64_t n = sizes_[group];
    int64_t piece = int64_t(input.bytes()) / n;
    std::vector<char> send(input.bytes()), receive(input.bytes());
    splitPieces(input, splitDim, n, send.data());
    MPI_Request request;
    checkCount(piece);
    check(MPI_Ialltoall(send.data(), int(piece), MPI_BYTE, receive.data(),
                        int(piece), MPI_BYTE, comms_[group], &request),
          "MPI_Ialltoall");
    wait(&request, 1, "MPI_Ialltoall", onGroup(group));
    joinPieces(receive.data(), n, concatDim, out);
  }

  void permute(int64_t group,
               const std::vector<std::pair<int64_t, int64_t>> &pairs,
               const Tensor &input, Tensor &out, Stream) override {
    int64_t me = indices_[group];
    std::vector<MPI_Request> requests;
    bool received = false;
    checkCount(input.bytes());
    for (auto [source, target] : pairs) {
      if (source == me && target == me) {
        std::memcpy(out.data, input.data, input.bytes());
        received = true;
        continue;
      }
      if (source == me) {
        requests.emplace_back();
        check(MPI_Isend(input.data, int(input.bytes()), MPI_BYTE, int(target),
                        0, comms_[group], &requests.back()),
              "MPI_Isend");
      }
      if (target == me) {
        requests.emplace_back();
        received = true;
        check(MPI_Irecv(out.data, int(out.bytes()), MPI_BYTE, int(source), 0,
                        comms_[group], &requests.back()),
              "MPI_Irecv");
      }
    }
    if (!received)
      std::memset(out.data, 0, out.bytes());
    if (!requests.empty())
      wait(requests.data(), int(requests.size()), "MPI_Isend/MPI_Irecv",
           onGroup(group));
  }

  void exchange(int64_t group, const std::vector<int64_t> &sendBytes,
                const void *send, const std::vector<int64_t> &receiveBytes,
                void *receive) override {
    int64_t n = sizes_[group];
    std::vector<int> sendCounts(static_cast<size_t>(n)), sendDispls(sendCounts),
        receiveCounts(sendCounts), receiveDispls(sendCounts);
    int64_t sendAt = 0, receiveAt = 0;
    for (int64_t j = 0; j < n; ++j) {
      checkCount(sendBytes[size_t(j)]);
      checkCount(receiveBytes[size_t(j)]);
      checkCount(sendAt);
      checkCount(receiveAt);
      sendCounts[size_t(j)] = int(sendBytes[size_t(j)]);
      sendDispls[size_t(j)] = int(sendAt);
      receiveCounts[size_t(j)] = int(receiveBytes[size_t(j)]);
      receiveDispls[size_t(j)] = int(receiveAt);
      sendAt += sendBytes[size_t(j)];
      receiveAt += receiveBytes[size_t(j)];
    }
    MPI_Request request;
    check(MPI_Ialltoallv(send, sendCounts.data(), sendDispls.data(), MPI_BYTE,
                         receive, receiveCounts.data(), receiveDispls.data(),
                         MPI_BYTE, comms_[group], &request),
          "MPI_Ialltoallv");
    wait(&request, 1, "MPI_Ialltoallv", onGroup(group));
  }

  std::unique_ptr<Transfer> send(int64_t toRank, int64_t tag,
                                 const Tensor &input) override {
    checkCount(input.bytes());
    checkPeer(toRank, "send to");
    auto transfer =
        std::make_unique<MpiTransfer>(*this, "MPI_Isend", onPeer(toRank));
    check(MPI_Isend(input.data, int(input.bytes()), MPI_BYTE, int(toRank),
                    int(tag), MPI_COMM_WORLD, &transfer->request),
          "MPI_Isend");
    return transfer;
  }

  std::unique_ptr<Transfer> recv(int64_t fromRank, int64_t tag,
                                 Tensor &out) override {
    checkCount(out.bytes());
    checkPeer(fromRank, "receive from");
    auto transfer =
        std::make_unique<MpiTransfer>(*this, "MPI_Irecv", onPeer(fromRank));
    check(MPI_Irecv(out.data, int(out.bytes()), MPI_BYTE, int(fromRank),
                    int(tag), MPI_COMM_WORLD, &transfer->request),
          "MPI_Irecv");
    return transfer;
  }

  std::vector<std::string> gatherToRoot(const std::string &bytes) override {
    int length = int(bytes.size());
    std::vector<int> lengths(size_), displacements(size_);
    MPI_Request request;
    check(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0,
                      MPI_COMM_WORLD, &request),
          "MPI_Igather");
    wait(&request, 1, "MPI_Igather", onWorld());
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      displacements[r] = int(total);
      total += lengths[r];
    }
    checkCount(total);
    std::vector<char> all(rank_ == 0 ? total : 0);
    check(MPI_Igatherv(bytes.data(), length, MPI_BYTE, all.data(),
                       lengths.data(), displacements.data(), MPI_BYTE, 0,
                       MPI_COMM_WORLD, &request),
          "MPI_Igatherv");
    wait(&request, 1, "MPI_Igatherv", onWorld());
    std::vector<std::string> out;
    if (rank_ == 0)
      for (int r = 0; r < size_; ++r)
        out.emplace_back(all.data() + displacements[r], lengths[r]);
    return out;
  }

  void barrier() override {
    MPI_Request request;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    wait(&request, 1, "MPI_Ibarrier", onWorld());
  }

  void agree(std::vector<int64_t> &values, ReduceOp kind) override {
    MPI_Op op = kind == ReduceOp::Max   ? MPI_MAX
                : kind == ReduceOp::Min ? MPI_MIN
                                        : MPI_SUM;
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), int(values.size()),
                         MPI_INT64_T, op, MPI_COMM_WORLD, &request),
          "MPI_Iallreduce");
    wait(&request, 1, "MPI_Iallreduce", onWorld());
  }

private:
  /// Reduction operands in a type MPI can reduce: bf16/f16 go through f32.
  struct Reduction {
    Reduction(const Tensor &input, ReduceOp kind, MpiCollectives &self)
        : input(input) {
      op = kind == ReduceOp::Max   ? MPI_MAX
           : kind == ReduceOp::Min ? MPI_MIN
                                   : MPI_SUM;
      switch (input.dtype) {
      case DType::F64:
        type = MPI_DOUBLE;
        break;
      case DType::I64:
        type = MPI_INT64_T;
        break;
      case DType::I32:
        type = MPI_INT32_T;
        break;
      case DType::I1:
        throw CommError(
            self.where("reduction of an i1 tensor is not supported"));
      default:
        type = MPI_FLOAT;
        break;
      }
      self.checkCount(input.size());
      widened = input.dtype == DType::F16 || input.dtype == DType::BF16;
      buffer.resize(input.size() * elementBytes());
      convertElements(input.dtype, input.data,
                      widened ? DType::F32 : input.dtype, buffer.data(),
                      input.size());
    }
    size_t elementBytes() const {
      return widened ? 4 : dtypeBytes(input.dtype);
    }
    void *data() { return buffer.data(); }
    void store(Tensor &out) { storeFrom(buffer.data(), out); }
    void storeFrom(const void *src, Tensor &out) {
      convertElements(widened ? DType::F32 : input.dtype, src, out.dtype,
                      out.data, out.size());
    }
    const Tensor &input;
    std::vector<char> buffer;
    MPI_Datatype type;
    MPI_Op op;
    bool widened = false;
  };

  std::string where(const std::string &what) const {
    std::string text = "rank " + std::to_string(rank_);
    if (context.step)
      text += ", step " + std::to_string(context.step);
    if (!context.what.empty())
      text += ", " + context.what;
    return text + ": " + what;
  }

  void check(int code, const char *call) const {
    if (code == MPI_SUCCESS)
      return;
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, message, &length);
    throw CommError(
        where(std::string(call) + " failed: " + std::string(message, length)));
  }

  /// One MPI request; waits through the watchdog, cancels when dropped
  /// unfinished.
  struct MpiTransfer final : public Transfer {
    MpiTransfer(const MpiCollectives &comm, const char *call, Waiting waiting)
        : comm(comm), call(call), waiting(waiting) {}
    ~MpiTransfer() override {
      if (request == MPI_REQUEST_NULL)
        return;
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized)
        return;
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
    void wait() override {
      if (request != MPI_REQUEST_NULL)
        comm.wait(&request, 1, call, waiting);
    }
    const MpiCollectives &comm;
    const char *call;
    Waiting waiting;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  void checkPeer(int64_t rank, const char *what) const {
    if (rank < 0 || rank >= size_)
      throw CommError(where(std::string("cannot ") + what + " rank " +
                            std::to_string(rank) + " of " +
                            std::to_string(size_)));
  }

  void checkCount(int64_t count) const {
    if (count > INT32_MAX)
      throw CommError(where("a message of " + std::to_string(count) +
                            " elements is larger than MPI counts allow"));
  }

  Waiting onGroup(int64_t group) const {
    return {Waiting::Group, group, ++seqs_[size_t(group)]};
  }
  Waiting onWorld() const { return {Waiting::World, 0, ++worldSeq_}; }
  Waiting onPeer(int64_t rank) const {
    return {Waiting::Peer, rank, ++peerSeq_};
  }

  /// The world ranks, other than `report.rank`, its call waits for.
  std::vector<int> waitedFor(const Report &report) const {
    std::vector<int> ranks;
    const Waiting &w = report.waiting;
    for (int r = 0; r < size_; ++r) {
      if (r == report.rank)
        continue;
      bool waited = false;
      if (w.kind == Waiting::World)
        waited = true;
      else if (w.kind == Waiting::Peer)
        waited = r == w.target;
      else if (w.target >= 0 && size_t(w.target) < colors_.size() &&
               colors_[size_t(w.target)].size() == size_t(size_))
        waited = colors_[size_t(w.target)][size_t(r)] ==
                 colors_[size_t(w.target)][size_t(report.rank)];
      if (waited)
        ranks.push_back(r);
    }
    return ranks;
  }

  /// Receives the reports other ranks' watchdogs sent; reports of an
  /// incident this rank already dealt with are dropped.
  void drainReports() const {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, watch_, &flag, &status) !=
              MPI_SUCCESS ||
          !flag)
        return;
      std::array<int64_t, kReportWords> words{};
      if (MPI_Recv(words.data(), kReportWords, MPI_INT64_T, status.MPI_SOURCE,
                   kReportTag, watch_, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return;
      Report report = Report::decode(status.MPI_SOURCE, words);
      if (report.giveUpUs >= incidentEndUs_)
        reports_[report.rank] = report;
    }
  }

  static std::string rankList(const std::vector<int> &ranks) {
    std::string text;
    for (size_t i = 0; i < ranks.size(); ++i)
      text += (i == 0                  ? ""
               : i + 1 == ranks.size() ? " and "
                                       : ", ") +
              std::to_string(ranks[i]);
    return (ranks.size() == 1 ? "rank " : "ranks ") + text;
  }
  static const char *verb(size_t count, const char *one, const char *many) {
    return count == 1 ? one : many;
  }

  std::string timedOut(const char *call) const {
    return std::string(call) + " did not complete within " +
           std::to_string(int64_t(timeout_)) + " s (--timeout)";
  }

  /// How long the ranks that time out exchange reports before one of them
  /// names the culprit.
  double graceSeconds() const {
    return std::min(10.0, std::max(1.0, timeout_ / 2));
  }

  /// The watchdog fired (or another rank's report says the job is failing):
  /// tell every other rank what this one waits for, collect their reports
  /// for a grace period, and let one rank name the ranks that never
  /// reported. Throws CommError on the rank that reports; the others stay
  /// quiet until that rank aborts the job.
  /// Sends `report` to every other rank (non-blocking; the buffers stay in
  /// sent_ while the sends may be in flight).
  void sendReport(const Report &report) const {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_)
        continue;
      sent_.push_back(report.encode());
      MPI_Request request;
      if (MPI_Isend(sent_.back().data(), kReportWords, MPI_INT64_T, r,
                    kReportTag, watch_, &request) == MPI_SUCCESS)
        MPI_Request_free(&request);
    }
  }

  [[noreturn]] void failed(const char *call, const Waiting &waiting,
                           int64_t waitStartUs) const {
    Report mine{rank_, waiting, context.step, waitStartUs, nowUs(), true};
    sendReport(mine);
    auto graceEnd = std::chrono::steady_clock::now() +
                    std::chrono::duration<double>(graceSeconds());
    while (std::chrono::steady_clock::now() < graceEnd) {
      drainReports();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    drainReports();
    std::map<int, Report> reports = reports_;
    reports[rank_] = mine;
    reports_.clear();
    incidentEndUs_ = nowUs();
    aliveSent_ = false;

    // Culprits: ranks a timed-out reporter waits for that sent no report
    // at all; the lowest timed-out rank that waits for one of them speaks
    // for everyone. A rank that only said it is alive names nobody.
    std::set<int> culprits, witnesses;
    for (const auto &[rank, report] : reports)
      if (report.timedOut)
        for (int r : waitedFor(report))
          if (!reports.count(r)) {
            culprits.insert(r);
            witnesses.insert(rank);
          }
    std::vector<int> waiters;
    for (const auto &entry : reports)
      waiters.push_back(entry.first);
    if (culprits.empty())
      throw CommError(
          where(timedOut(call) + ": every rank it waits for is waiting too (" +
                rankList(waiters) +
                " wait; a deadlock, or ranks that run different programs)"));
    if (*witnesses.begin() == rank_) {
      std::vector<int> named(culprits.begin(), culprits.end());
      std::vector<int> witnessList(witnesses.begin(), witnesses.end());
      throw CommError(
          where(timedOut(call) + ": " + rankList(named) +
                " stalled or failed: " + rankList(witnessList) +
                verb(witnessList.size(), " waits for ", " wait for ") +
                (named.size() == 1 ? "it" : "them") + " and " +
                (named.size() == 1 ? "it sent" : "they sent") +
                " no word (" +
                std::to_string(waiters.size()) + " of " +
                std::to_string(size_) + " ranks reported waiting)"));
    }
    // Another rank reports; if it cannot (it died meanwhile), this one
    // does after a while, so the job still ends.
    std::this_thread::sleep_for(
        std::chrono::duration<double>(graceSeconds() + 15));
    throw CommError(where(timedOut(call) +
                          ": another rank of the group failed, stalled or "
                          "runs a different program"));
  }

  /// Between polls and once a call completed: reports from ranks whose
  /// watchdog fired. A timed-out report that waits for this rank and gave
  /// up before this wait began means this rank is the late one (even if the
  /// call then completed). Otherwise a rank still waiting says once that it
  /// is alive, so that it is never named, and goes on waiting under its own
  /// timeout.
  void checkReports(const char *call, const Waiting &waiting,
                    int64_t waitStartUs, bool completed) const {
    drainReports();
    if (reports_.empty())
      return;
    std::vector<int> gaveUp;
    int64_t earliest = INT64_MAX;
    for (const auto &[rank, report] : reports_) {
      if (!report.timedOut)
        continue;
      std::vector<int> waited = waitedFor(report);
      if (report.giveUpUs < waitStartUs &&
          std::find(waited.begin(), waited.end(), rank_) != waited.end()) {
        gaveUp.push_back(rank);
        earliest = std::min(earliest, report.giveUpUs);
      }
    }
    if (!gaveUp.empty()) {
      reports_.clear();
      incidentEndUs_ = nowUs();
      aliveSent_ = false;
      char late[32];
      std::snprintf(late, sizeof late, "%.1f",
                    double(waitStartUs - earliest) / 1e6);
      throw CommError(where(std::string(call) +
                            ": this rank is the late one: " + rankList(gaveUp) +
                            " gave up waiting for it " + late +
                            " s before it got here (it stalled or ran slow)"));
    }
    if (!completed && !aliveSent_) {
      sendReport({rank_, waiting, context.step, waitStartUs, nowUs(), false});
      aliveSent_ = true;
    }
  }

  /// Polls until the requests complete; past the timeout, raises CommError
  /// through the exchange above. Sleeps between polls so oversubscribed
  /// ranks leave the cores to the ranks that still have work.
  void wait(MPI_Request *requests, int count, const char *call,
            const Waiting &waiting) const {
    auto start = std::chrono::steady_clock::now();
    int64_t startUs = nowUs();
    for (int polls = 0;; ++polls) {
      // Reports are looked for every 64 polls while waiting, and once when
      // the call completed: one MPI_Iprobe for a call that completes at once.
      if (timeout_ > 0 && polls % 64 == 63)
        checkReports(call, waiting, startUs, false);
      int done = 0;
      check(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE),
            "MPI_Testall");
      if (done) {
        if (timeout_ > 0)
          checkReports(call, waiting, startUs, true);
        return;
      }
      double elapsed = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      if (timeout_ > 0 && elapsed > timeout_)
        failed(call, waiting, startUs);
      if (polls < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(
            std::chrono::microseconds(polls < 1024 ? 20 : 200));
    }
  }

  double timeout_;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Comm> comms_;
  std::vector<int64_t> indices_, sizes_;
  std::vector<std::vector<int64_t>> shapes_; // per group: its axis sizes
  /// colors_[g][r]: rank r's color in the split of group g.
  std::vector<std::vector<int64_t>> colors_;
  MPI_Comm watch_ = MPI_COMM_NULL;
  // The watchdog's state: calls started per group, world collectives and
  // transfers (numbered for messages), and reports other ranks sent.
  mutable std::vector<int64_t> seqs_;
  mutable int64_t worldSeq_ = 0, peerSeq_ = 0;
  mutable std::map<int, Report> reports_;
  mutable std::deque<std::array<int64_t, kReportWords>> sent_;
  mutable int64_t incidentEndUs_ = 0;
  mutable bool aliveSent_ = false; // this incident's "alive" report
};

} // namespace

std::unique_ptr<Collectives> createMpiCollectives(const Program &program,
                                                  double timeoutSeconds) {
  return std::make_unique<MpiCollectives>(program, timeoutSeconds);
}

} // namespace par::rt
