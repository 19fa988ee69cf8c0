//===- Pipeline.cpp - --par-pipeline: stages, micro-batches, schedules ----===//

#include "par/Transforms/Pipeline.h"

#include "par/Dialect/Par/IR/ParConstants.h"
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#define DEBUG_TYPE "par-pipeline"

namespace mlir::par {
#define GEN_PASS_DEF_PIPELINEPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

//===----------------------------------------------------------------------===//
// The record and the schedules
//===----------------------------------------------------------------------===//

int64_t PipelineInfo::stageOfLayer(int64_t layer) const {
  int64_t stage = 0;
  for (int64_t s = 1; s < int64_t(firstLayers.size()); ++s)
    if (layer >= firstLayers[s])
      stage = s;
  return stage;
}

std::optional<PipelineInfo> mlir::par::getPipeline(Operation *func) {
  auto record =
      func->getAttrOfType<DictionaryAttr>(ParDialect::kPipelineAttrName);
  if (!record)
    return std::nullopt;
  PipelineInfo info;
  if (auto axis = record.getAs<StringAttr>("axis"))
    info.axis = axis.getValue().str();
  if (auto stages = record.getAs<IntegerAttr>("stages"))
    info.stages = stages.getInt();
  if (auto m = record.getAs<IntegerAttr>("microbatches"))
    info.microbatches = m.getInt();
  if (auto schedule = record.getAs<StringAttr>("schedule"))
    info.schedule = schedule.getValue().str();
  if (auto v = record.getAs<IntegerAttr>("virtual"))
    info.virtualStages = v.getInt();
  if (auto placement = record.getAs<StringAttr>("placement"))
    info.userPlaced = placement.getValue() == "given";
  if (auto batch = record.getAs<StringAttr>("batch"))
    info.dividedBatch = batch.getValue() == "divided";
  if (auto first = record.getAs<DenseI64ArrayAttr>("first_layers"))
    info.firstLayers.assign(first.asArrayRef().begin(),
                            first.asArrayRef().end());
  return info;
}

void mlir::par::setPipeline(Operation *func, const PipelineInfo &info) {
  Builder b(func->getContext());
  SmallVector<NamedAttribute> entries{
      b.getNamedAttr("axis", b.getStringAttr(info.axis)),
      b.getNamedAttr("stages", b.getI64IntegerAttr(info.stages)),
      b.getNamedAttr("microbatches", b.getI64IntegerAttr(info.microbatches)),
      b.getNamedAttr("schedule", b.getStringAttr(info.schedule)),
      b.getNamedAttr("first_layers", b.getDenseI64ArrayAttr(info.firstLayers)),
  };
  if (info.virtualStages > 1)
    entries.push_back(
        b.getNamedAttr("virtual", b.getI64IntegerAttr(info.virtualStages)));
  if (info.userPlaced)
    entries.push_back(b.getNamedAttr("placement", b.getStringAttr("given")));
  if (info.dividedBatch)
    entries.push_back(b.getNamedAttr("batch", b.getStringAttr("divided")));
  func->setAttr(ParDialect::kPipelineAttrName, b.getDictionaryAttr(entries));
}

ArrayRef<StringRef> mlir::par::pipelineSchedules() {
  static const StringRef names[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};
  return names;
}

static char slotLetter(SlotKind kind) { return "FBW"[int(kind)]; }

double SlotTimes::of(const PipelineSlot &slot) const {
  switch (slot.kind) {
  case SlotKind::F:
    return forward[slot.chunk];
  case SlotKind::B:
    return backward[slot.chunk];
  case SlotKind::W:
    return weight[slot.chunk];
  }
  return 0;
}

/// The forward and backward slots of device `d`, in the order the schedule
/// runs them (zb-h1's W slots are placed by the simulation).
static SmallVector<PipelineSlot> baseOrder(const PipelineInfo &info,
                                           int64_t d) {
  int64_t p = info.stages, m = info.microbatches, v = info.virtualStages;
  SmallVector<PipelineSlot> slots;
  if (info.schedule == "gpipe") {
    for (int64_t i = 0; i < m; ++i)
      slots.push_back({SlotKind::F, i, d});
    for (int64_t i = 0; i < m; ++i)
      slots.push_back({SlotKind::B, i, d});
    return slots;
  }
  // Megatron's order: the k-th forward (backward) of the device takes
  // micro-batches in groups of p, each group through the device's chunks in
  // turn (backwards: last chunk first). With one chunk this is plain 1F1B.
  int64_t n = m * v;
  auto nth = [&](SlotKind kind, int64_t k) {
    int64_t group = k / (p * v), within = k % (p * v);
    int64_t local = within / p;
    if (kind == SlotKind::B)
      local = v - 1 - local;
    if (v == 1)
      return PipelineSlot{kind, k, d};
    return PipelineSlot{kind, group * p + within % p, local * p + d};
  };
  int64_t warmup = v == 1 ? p - d - 1 : (p - d - 1) * 2 + (v - 1) * p;
  warmup = std::min(warmup, n);
  int64_t forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards)
    slots.push_back(nth(SlotKind::F, forwards));
  while (forwards < n) {
    slots.push_back(nth(SlotKind::F, forwards++));
    slots.push_back(nth(SlotKind::B, backwards++));
  }
  while (backwards < n)
    slots.push_back(nth(SlotKind::B, backwards++));
  return slots;
}

ScheduleTimes mlir::par::simulateSchedule(const PipelineInfo &info,
                                          const SlotTimes &length) {
  int64_t p = info.stages, m = info.microbatches, chunks = info.chunks();
  bool zeroBubble = info.schedule == "zb-h1";
  ScheduleTimes times;
  times.slots.assign(p, {});
  times.start.assign(p, {});
  SmallVector<SmallVector<PipelineSlot>> base;
  for (int64_t d = 0; d < p; ++d)
    base.push_back(baseOrder(info, d));
  // When each virtual stage finished each micro-batch's F and B; `unknown`
  // until that slot has run.
  constexpr double unknown = -1;
  SmallVector<SmallVector<double>> endF(chunks,
                                        SmallVector<double>(m, unknown)),
      endB(chunks, SmallVector<double>(m, unknown));
  auto readyAt = [&](const PipelineSlot &slot) {
    if (slot.kind == SlotKind::F)
      return slot.chunk == 0 ? 0.0 : endF[slot.chunk - 1][slot.microbatch];
    if (slot.kind == SlotKind::B)
      return slot.chunk == chunks - 1 ? endF[slot.chunk][slot.microbatch]
                                      : endB[slot.chunk + 1][slot.microbatch];
    return endB[slot.chunk][slot.microbatch];
  };
  SmallVector<size_t> next(p, 0);
  SmallVector<double> clock(p, 0), busy(p, 0);
  SmallVector<SmallVector<PipelineSlot>> pendingW(p);
  // zb-h1: the micro-batches whose F ran and W did not (their inputs are
  // kept), at most p on any device: 1F1B's peak, on its first stage.
  SmallVector<int64_t> held(p, 0);
  // Each round runs the slot that starts first over all devices: a
  // device's next F or B once its input is made; with zb-h1 a pending W
  // instead when the device would otherwise wait, or when its next F
  // would hold more than p micro-batches.
  while (true) {
    int64_t bestDevice = -1;
    PipelineSlot bestSlot;
    double bestStart = 0;
    bool bestIsW = false;
    for (int64_t d = 0; d < p; ++d) {
      std::optional<PipelineSlot> slot;
      double start = 0;
      bool isW = false;
      double ready =
          next[d] < base[d].size() ? readyAt(base[d][next[d]]) : unknown;
      bool nextIsF =
          next[d] < base[d].size() && base[d][next[d]].kind == SlotKind::F;
      bool mustW = next[d] == base[d].size() || (nextIsF && held[d] >= p);
      bool idle = ready == unknown || ready > clock[d];
      if (!pendingW[d].empty() && (mustW || idle)) {
        slot = pendingW[d].front();
        start = clock[d];
        isW = true;
      } else if (ready != unknown) {
        slot = base[d][next[d]];
        start = std::max(clock[d], ready);
      }
      if (slot && (bestDevice < 0 || start < bestStart)) {
        bestDevice = d;
        bestSlot = *slot;
        bestStart = start;
        bestIsW = isW;
      }
    }
    if (bestDevice < 0)
      break;
    int64_t d = bestDevice;
    double end = bestStart + length.of(bestSlot);
    times.slots[d].push_back(bestSlot);
    times.start[d].push_back(bestStart);
    clock[d] = end;
    busy[d] += length.of(bestSlot);
    if (bestIsW) {
      pendingW[d].erase(pendingW[d].begin());
      --held[d];
      continue;
    }
    if (bestSlot.kind == SlotKind::F && zeroBubble)
      ++held[d];
    ++next[d];
    (bestSlot.kind == SlotKind::F ? endF
                                  : endB)[bestSlot.chunk][bestSlot.microbatch] =
        end;
    if (bestSlot.kind == SlotKind::B && zeroBubble)
      pendingW[d].push_back({SlotKind::W, bestSlot.microbatch, bestSlot.chunk});
  }
  double busiest = 0;
  for (int64_t d = 0; d < p; ++d) {
    assert(next[d] == base[d].size() && pendingW[d].empty() &&
           "a pipeline schedule that stalls");
    times.makespan = std::max(times.makespan, clock[d]);
    busiest = std::max(busiest, busy[d]);
  }
  times.bubble = busiest > 0 ? (times.makespan - busiest) / busiest : 0;
  return times;
}

double mlir::par::formulaBubble(const PipelineInfo &info,
                                const SlotTimes &times) {
  double p = double(info.stages), m = double(info.microbatches);
  if (info.schedule == "interleaved")
    return (p - 1) / (double(info.virtualStages) * m);
  if (info.schedule != "zb-h1")
    return (p - 1) / m;
  // The busiest device's F, B and W per micro-batch.
  double f = 0, b = 0, w = 0, busiest = -1;
  for (int64_t d = 0; d < info.stages; ++d) {
    double df = 0, db = 0, dw = 0;
    for (int64_t c = d; c < info.chunks(); c += info.stages) {
      df += times.forward[c];
      db += times.backward[c];
      dw += times.weight[c];
    }
    if (df + db + dw > busiest) {
      busiest = df + db + dw;
      f = df, b = db, w = dw;
    }
  }
  if (busiest <= 0)
    return 0;
  return std::max(0.0, (p - 1) * (f + b - w) / (m * (f + b + w)));
}

void mlir::par::resolveAutoSchedule(func::FuncOp func, PipelineInfo &info) {
  if (info.schedule != "auto")
    return;
  std::optional<std::pair<double, std::string>> best;
  for (StringRef schedule : {"1f1b", "zb-h1", "gpipe"}) {
    PipelineInfo trial = info;
    trial.schedule = schedule.str();
    markWeightGradients(func, trial);
    SlotTimes work(trial.chunks());
    func.walk([&](Operation *op) { addSlotWork(op, trial, work); });
    double bubble = simulateSchedule(trial, work).bubble;
    if (!best || bubble < best->first)
      best = {bubble, trial.schedule};
  }
  info.schedule = best->second;
  setPipeline(func, info);
}

static std::optional<SlotKind> kindOf(Operation *op) {
  std::optional<Phase> phase = getPhase(op);
  if (phase == Phase::forward)
    return SlotKind::F;
  if (phase == Phase::backward)
    return op->hasAttr(ParDialect::kWeightGradientAttrName) ? SlotKind::W
                                                            : SlotKind::B;
  return std::nullopt;
}

std::optional<PipelineSlot> mlir::par::slotOf(Operation *op) {
  std::optional<SlotKind> kind = kindOf(op);
  std::optional<int64_t> mb = getMicrobatch(op);
  if (!kind || !mb)
    return std::nullopt;
  return PipelineSlot{*kind, *mb, getStage(op).value_or(0)};
}

std::string mlir::par::slotLabel(const PipelineSlot &slot,
                                 const PipelineInfo &info) {
  std::string label = slotLetter(slot.kind) + std::to_string(slot.microbatch);
  if (info.virtualStages > 1)
    label += ".c" + std::to_string(slot.chunk);
  return label;
}

/// The FLOPs of `op`: its rule's, or of a fused group the sum of its
/// members' (the members carry no marks of their own: the group runs in
/// its slot); none for an op without a rule.
static std::optional<double> flopsOf(Operation *op) {
  if (auto fused = dyn_cast<FusedOp>(op))
    return fused.getFlops();
  if (auto rule = dyn_cast<ShardingRuleOpInterface>(op))
    return rule.getWork().flops;
  return std::nullopt;
}

/// Adds `work` to the slot of kind `kind` of virtual stage `chunk`.
static void addTo(SlotTimes &times, SlotKind kind, int64_t chunk, double work) {
  (kind == SlotKind::F   ? times.forward
   : kind == SlotKind::B ? times.backward
                         : times.weight)[chunk] += work;
}

/// `op`'s virtual stage and FLOPs per micro-batch of `info`, where it has
/// FLOPs and a stage under `chunks`.
static std::optional<std::pair<int64_t, double>>
workOf(Operation *op, const PipelineInfo &info, int64_t chunks) {
  std::optional<double> flops = flopsOf(op);
  int64_t chunk = getStage(op).value_or(0);
  if (!flops || chunk >= chunks)
    return std::nullopt;
  return std::make_pair(chunk, *flops / double(info.microbatches));
}

void mlir::par::addSlotWork(Operation *op, const PipelineInfo &info,
                            SlotTimes &times) {
  std::optional<SlotKind> kind = kindOf(op);
  if (!kind)
    return;
  if (std::optional<std::pair<int64_t, double>> work =
          workOf(op, info, int64_t(times.forward.size())))
    addTo(times, *kind, work->first, work->second);
}

/// The backward ops of `func`'s micro-batches that zb-h1 runs in W slots.
/// B: a backward op that a value read in another virtual stage depends on
/// through backward ops of its stage; W: the other backward ops.
static DenseSet<Operation *> weightGradientOps(func::FuncOp func) {
  DenseSet<Operation *> weight;
  Block &body = func.getBody().front();
  DenseSet<Operation *> input;
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (!inPhase(&op, Phase::backward))
      continue;
    std::optional<int64_t> stage = getStage(&op), mb = getMicrobatch(&op);
    bool needed = false;
    for (Operation *user : op.getUsers()) {
      if (user->hasTrait<mlir::OpTrait::IsTerminator>())
        continue;
      std::optional<int64_t> userStage = getStage(user);
      // (An op another B reads is B whatever its micro-batch: a tied
      // weight's accumulation feeds the total the stage sends.)
      if (userStage != stage || input.contains(user)) {
        needed = true;
        break;
      }
    }
    if (needed)
      input.insert(&op);
    else if (mb)
      weight.insert(&op);
  }
  return weight;
}

void mlir::par::markWeightGradients(func::FuncOp func,
                                    const PipelineInfo &info) {
  func.walk([](Operation *op) {
    op->removeAttr(ParDialect::kWeightGradientAttrName);
  });
  if (info.schedule != "zb-h1")
    return;
  for (Operation *op : weightGradientOps(func))
    op->setAttr(ParDialect::kWeightGradientAttrName,
                UnitAttr::get(func.getContext()));
}

StepSlotWork
mlir::par::stepSlotWork(func::FuncOp func, const PipelineInfo &info,
                        llvm::function_ref<double(Operation *)> cost,
                        bool withZeroBubble) {
  DenseSet<Operation *> weight;
  if (withZeroBubble)
    weight = weightGradientOps(func);
  assert(cost && "stepSlotWork needs a cost for each op");
  int64_t chunks = info.chunks();
  StepSlotWork work{SlotTimes(chunks), SlotTimes(chunks),
                    SlotTimes(withZeroBubble ? chunks : 0),
                    SlotTimes(withZeroBubble ? chunks : 0)};
  func.walk([&](Operation *op) {
    std::optional<Phase> phase = getPhase(op);
    if (phase != Phase::forward && phase != Phase::backward)
      return;
    std::optional<std::pair<int64_t, double>> flops = workOf(op, info, chunks);
    if (!flops)
      return;
    auto [chunk, f] = *flops;
    double c = cost(op) / double(info.microbatches);
    SlotKind kind = *phase == Phase::forward ? SlotKind::F : SlotKind::B;
    addTo(work.flops, kind, chunk, f);
    addTo(work.cost, kind, chunk, c);
    if (withZeroBubble) {
      SlotKind zeroBubble =
          kind == SlotKind::B && weight.contains(op) ? SlotKind::W : kind;
      addTo(work.zeroBubbleFlops, zeroBubble, chunk, f);
      addTo(work.zeroBubbleCost, zeroBubble, chunk, c);
    }
  });
  return work;
}

double mlir::par::scheduledShare(const PipelineInfo &info,
                                 const SlotTimes &work) {
  double perMicrobatch = 0;
  for (int64_t c = 0; c < int64_t(work.forward.size()); ++c)
    perMicrobatch += work.forward[c] + work.backward[c] + work.weight[c];
  double total =
      perMicrobatch * double(std::max<int64_t>(1, info.microbatches));
  if (total <= 0)
    return 1.0 / double(std::max<int64_t>(1, info.stages));
  return simulateSchedule(info, work).makespan / total;
}

//===----------------------------------------------------------------------===//
// Stages of ops and arguments
//===----------------------------------------------------------------------===//

SmallVector<int64_t> mlir::par::argumentStages(func::FuncOp func) {
  SmallVector<int64_t> stages;
  for (BlockArgument arg : func.getArguments()) {
    std::optional<int64_t> forward, any;
    for (Operation *user : arg.getUsers()) {
      std::optional<int64_t> stage = getStage(user);
      if (!stage)
        continue;
      any = std::min(any.value_or(*stage), *stage);
      if (inPhase(user, Phase::forward))
        forward = std::min(forward.value_or(*stage), *stage);
    }
    stages.push_back(forward.value_or(any.value_or(0)));
  }
  return stages;
}

/// Gives each op selected by `filter` without a stage the latest stage of
/// its producers, then those still without one the earliest stage of their
/// readers.
static void sweepStages(Block &body,
                        llvm::function_ref<bool(Operation *)> filter) {
  for (Operation &op : body.without_terminator()) {
    if (getStage(&op) || !filter(&op))
      continue;
    std::optional<int64_t> stage;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (std::optional<int64_t> s = getStage(def))
          stage = std::max(stage.value_or(*s), *s);
    if (stage)
      setStage(&op, *stage);
  }
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (getStage(&op) || !filter(&op))
      continue;
    std::optional<int64_t> stage;
    for (Operation *user : op.getUsers())
      if (std::optional<int64_t> s = getStage(user))
        stage = std::min(stage.value_or(*s), *s);
    if (stage)
      setStage(&op, *stage);
  }
}

void mlir::par::assignStages(func::FuncOp func, const PipelineInfo &info) {
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator())
    if (!getStage(&op))
      if (std::optional<int64_t> layer = getLayer(&op))
        setStage(&op, info.stageOfLayer(*layer));
  // The forward pass first: embeddings before the first layer run with it,
  // heads and losses after the last one with it.
  sweepStages(body, [](Operation *op) { return inPhase(op, Phase::forward); });
  SmallVector<int64_t> argStage = argumentStages(func);
  auto paramStage = [&](int64_t arg) -> std::optional<int64_t> {
    if (arg >= 0 && arg < int64_t(argStage.size()))
      return argStage[arg];
    return std::nullopt;
  };
  for (Operation &op : body.without_terminator()) {
    if (getStage(&op))
      continue;
    std::optional<int64_t> stage;
    SmallVector<int64_t> gradientOf = getGradientOf(&op);
    if (!gradientOf.empty())
      stage = paramStage(gradientOf.front());
    else if (std::optional<int64_t> master = getCopyOf(&op))
      stage = paramStage(*master);
    else if (std::optional<int64_t> master = getViewOf(&op))
      stage = paramStage(*master);
    else if (auto update = dyn_cast<OptimizerUpdateOpInterface>(&op))
      if (auto arg = dyn_cast<BlockArgument>(update.getParam()))
        stage = paramStage(arg.getArgNumber());
    if (stage)
      setStage(&op, *stage);
  }
  sweepStages(body, [](Operation *) { return true; });
  for (Operation &op : body.without_terminator())
    if (!getStage(&op))
      setStage(&op, 0);
}

SmallVector<int64_t> mlir::par::balancedFirstLayers(func::FuncOp func,
                                                    ArrayRef<int64_t> layers,
                                                    int64_t p) {
  int64_t n = int64_t(layers.size());
  SmallVector<int64_t> first(p, 0);
  auto indexOf = [&](int64_t layer) {
    return int64_t(llvm::lower_bound(layers, layer) - layers.begin());
  };
  // Contiguous groups minimizing the costliest stage (FLOPs of each
  // layer's forward and backward ops).
  SmallVector<double> cost(n, 0);
  for (Operation &op : func.getBody().front().without_terminator())
    if (std::optional<int64_t> layer = getLayer(&op))
      if (auto rule = dyn_cast<ShardingRuleOpInterface>(&op))
        if (int64_t i = indexOf(*layer); i < n && layers[i] == *layer)
          cost[i] += rule.getWork().flops;
  SmallVector<double> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + cost[i];
  constexpr double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: the costliest of s+1 stages over layers [0, i).
  SmallVector<SmallVector<double>> best(p, SmallVector<double>(n + 1, inf));
  SmallVector<SmallVector<int64_t>> cut(p, SmallVector<int64_t>(n + 1, 0));
  for (int64_t i = 1; i <= n; ++i)
    best[0][i] = prefix[i];
  for (int64_t s = 1; s < p; ++s)
    for (int64_t i = s + 1; i <= n; ++i)
      for (int64_t j = s; j < i; ++j) {
        double value = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (value < best[s][i]) {
          best[s][i] = value;
          cut[s][i] = j;
        }
      }
  int64_t end = n;
  for (int64_t s = p - 1; s > 0; --s) {
    end = cut[s][end];
    first[s] = layers[end];
  }
  first[0] = layers.front();
  return first;
}

LogicalResult mlir::par::placeStages(func::FuncOp func, PipelineInfo info) {
  SmallVector<int64_t> layers = forwardLayers(func);
  llvm::sort(layers);
  if (int64_t(layers.size()) < info.chunks())
    return func.emitError()
           << "--par-pipeline: " << info.chunks() << " (virtual) stages over '"
           << info.axis << "' but @" << func.getSymName() << " has "
           << layers.size() << " layer(s): each stage needs one";
  if (info.schedule == "interleaved" && info.microbatches % info.stages)
    return func.emitError()
           << "--par-pipeline: the interleaved schedule runs micro-batches "
              "in groups of the "
           << info.stages << " stages; microbatches=" << info.microbatches
           << " is not a multiple of " << info.stages;
  info.firstLayers = balancedFirstLayers(func, layers, info.chunks());
  func.walk([](Operation *op) { op->removeAttr(ParDialect::kStageAttrName); });
  assignStages(func, info);
  setPipeline(func, info);
  return success();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

struct PipelinePass : public par::impl::PipelinePassBase<PipelinePass> {
  using PipelinePassBase::PipelinePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!llvm::is_contained(pipelineSchedules(), StringRef(schedule)) &&
        schedule != "auto") {
      module.emitError() << "--par-pipeline schedule='" << schedule
                         << "' is not one of "
                         << llvm::join(pipelineSchedules(), ", ") << " or auto";
      return signalPassFailure();
    }
    if (schedule == "interleaved" ? virtualStages < 2 : virtualStages != 1) {
      // (auto chooses among the schedules of one chunk per device)
      module.emitError()
          << "--par-pipeline virtual=" << int64_t(virtualStages)
          << (schedule == "interleaved"
                  ? ": the interleaved schedule runs virtual=v >= 2 model "
                    "chunks per device"
                  : " applies to schedule=interleaved (model chunks per "
                    "device); schedule='" +
                        schedule + "' runs one");
      return signalPassFailure();
    }
    if (microbatches < 0) {
      module.emitError() << "--par-pipeline microbatches="
                         << int64_t(microbatches)
                         << " must be positive (or 0: one per stage)";
      return signalPassFailure();
    }
    bool any = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!isTrainingStep(func))
        continue;
      any = true;
      if (getPipeline(func)) {
        func.emitError() << "@" << func.getSymName()
                         << " is already pipelined (par.pipeline)";
        return signalPassFailure();
      }
      if (failed(pipeline(func)))
        return signalPassFailure();
    }
    if (!any) {
      module.emitError() << "--par-pipeline needs a training step: run "
                            "--par-autodiff before it";
      return signalPassFailure();
    }
  }

  LogicalResult pipeline(func::FuncOp func);
  FailureOr<SmallVector<int64_t>>
  stageLayers(func::FuncOp func, ArrayRef<int64_t> layers, int64_t p);
};

} // namespace

/// Copies the forward and backward ops of `func` once per micro-batch and
/// accumulates what leaves them: summed where each micro-batch makes a
/// share of the step (`sum`: a divided batch), else averaged. With
/// `splitAllSums` every sum of contributions is accumulated part by part
/// (the stages are not known yet: axis=auto).
static LogicalResult splitMicrobatches(func::FuncOp func, int64_t m, bool sum,
                                       bool splitAllSums);

llvm::SetVector<Operation *>
mlir::par::dataDependentPasses(func::FuncOp func,
                               ArrayRef<BlockArgument> data) {
  llvm::SetVector<Operation *> dependent;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (!inPhase(&op, Phase::forward) && !inPhase(&op, Phase::backward))
      continue;
    if (llvm::any_of(op.getOperands(), [&](Value v) {
          if (auto arg = dyn_cast<BlockArgument>(v))
            return llvm::is_contained(data, arg);
          return dependent.contains(v.getDefiningOp());
        }))
      dependent.insert(&op);
  }
  return dependent;
}

/// The micro-batches of `info`, the batch divided first where it says so.
static LogicalResult microbatch(func::FuncOp func, const PipelineInfo &info,
                                bool splitAllSums) {
  if (info.dividedBatch &&
      failed(mlir::par::divideBatch(func, info.microbatches)))
    return failure();
  return splitMicrobatches(func, info.microbatches, info.dividedBatch,
                           splitAllSums);
}

LogicalResult mlir::par::microbatchForAutoShard(func::FuncOp func,
                                                PipelineInfo info) {
  info.axis = "auto";
  info.stages = 0;
  if (failed(microbatch(func, info, /*splitAllSums=*/true)))
    return failure();
  setPipeline(func, info);
  return success();
}

LogicalResult PipelinePass::pipeline(func::FuncOp func) {
  MeshOp mesh = findMesh(func);
  if (!mesh)
    return func.emitError() << "--par-pipeline: cannot tell which mesh @"
                            << func.getSymName() << " runs on";
  // axis=auto: the micro-batches now, the axis and the stages by
  // --auto-shard (placeStages).
  if (axis == "auto") {
    if (!microbatches)
      return func.emitError()
             << "--par-pipeline axis=auto needs microbatches=m: the "
                "micro-batches are what a step trains on, the stages are "
                "what --auto-shard chooses";
    if (!this->layers.empty())
      return func.emitError() << "--par-pipeline axis=auto: layers= counts "
                                 "need the number of stages, which "
                                 "--auto-shard chooses (it balances the "
                                 "layers by their FLOPs)";
    WalkResult marked = func.walk([&](Operation *op) {
      if (getStage(op)) {
        op->emitError() << "--par-pipeline axis=auto: par.stage marks need "
                           "the number of stages, which --auto-shard "
                           "chooses";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (marked.wasInterrupted())
      return failure();
    PipelineInfo info;
    info.axis = "auto";
    info.stages = 0;
    info.microbatches = microbatches;
    info.schedule = schedule;
    info.virtualStages = virtualStages;
    info.dividedBatch = divideBatch;
    return microbatchForAutoShard(func, info);
  }
  // `--mesh=4x4x2` on a model that names no axes: the first axis, which
  // par named by position, is the pipeline axis.
  if (SmallVector<int64_t> unnamed = getUnnamedAxes(mesh);
      axis == "pp" && mesh.getAxisIndex("pp") < 0 &&
      llvm::is_contained(unnamed, 0)) {
    renameMeshAxes(mesh, {{cast<StringAttr>(mesh.getAxisNames()[0]),
                           StringAttr::get(mesh.getContext(), "pp")}});
    llvm::erase(unnamed, 0);
    setUnnamedAxes(mesh, unnamed);
  }
  std::optional<int64_t> p;
  SmallVector<std::string> names;
  for (auto [name, size] :
       llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes())) {
    names.push_back(cast<StringAttr>(name).getValue().str());
    if (names.back() == axis)
      p = size;
  }
  if (!p)
    return mesh.emitError()
           << "--par-pipeline: the mesh @" << mesh.getSymName()
           << " has no axis '" << axis << "' (axes: " << llvm::join(names, ", ")
           << "); name the pipeline axis with axis=NAME";

  // MPMD: stages hold whole tensors, so nothing may be split over the
  // pipeline axis.
  auto usesAxis = [&](Attribute attrs) {
    return shardingsUseAxis(attrs, axis);
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (usesAxis(func.getArgAttrDict(i)))
      return emitError(func.getArgument(i).getLoc())
             << "argument #" << i << " is split over '" << axis
             << "', the pipeline axis: stages hold whole tensors";
  WalkResult walked = func.walk([&](Operation *op) {
    if (usesAxis(op->getAttrDictionary())) {
      op->emitError() << "a sharding splits over '" << axis
                      << "', the pipeline axis: stages hold whole tensors";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();

  std::set<int64_t> layerSet;
  for (Operation &op : func.getBody().front().without_terminator())
    if (inPhase(&op, Phase::forward))
      if (std::optional<int64_t> layer = getLayer(&op))
        layerSet.insert(*layer);
  SmallVector<int64_t> layers(layerSet.begin(), layerSet.end());
  int64_t chunks = *p * int64_t(virtualStages);
  if (int64_t(layers.size()) < chunks) {
    if (virtualStages > 1)
      return func.emitError()
             << "--par-pipeline: the interleaved schedule with virtual="
             << int64_t(virtualStages) << " needs " << chunks
             << " model chunks (" << *p << " stages on axis '" << axis << "' x "
             << int64_t(virtualStages) << ") but @" << func.getSymName()
             << " has " << layers.size()
             << " layer(s) (ops marked par.layer): each chunk needs one";
    return func.emitError()
           << "--par-pipeline: " << *p << " stages (axis '" << axis
           << "') but @" << func.getSymName() << " has " << layers.size()
           << " layer(s) (ops marked par.layer): each stage needs one";
  }
  FailureOr<SmallVector<int64_t>> firstLayers =
      stageLayers(func, layers, chunks);
  if (failed(firstLayers))
    return failure();

  PipelineInfo info;
  info.axis = axis;
  info.stages = *p;
  info.microbatches = microbatches ? int64_t(microbatches) : *p;
  info.schedule = schedule;
  info.virtualStages = virtualStages;
  info.firstLayers = *firstLayers;
  info.dividedBatch = divideBatch;
  info.userPlaced = !this->layers.empty() ||
                    llvm::any_of(func.getBody().front(), [](Operation &op) {
                      return getStage(&op).has_value();
                    });
  if (schedule == "interleaved" && info.microbatches % *p != 0)
    return func.emitError()
           << "--par-pipeline: the interleaved schedule runs micro-batches "
              "in groups of the "
           << *p << " stages; microbatches=" << info.microbatches
           << " is not a multiple of " << *p;
  // Stages first, so that the micro-batches' copies keep them and the
  // accumulation can tell which contributions to a gradient come from
  // different stages; then the ops the split made.
  assignStages(func, info);
  if (failed(microbatch(func, info, /*splitAllSums=*/false)))
    return failure();
  assignStages(func, info);
  setPipeline(func, info);
  return success();
}

FailureOr<SmallVector<int64_t>>
PipelinePass::stageLayers(func::FuncOp func, ArrayRef<int64_t> layerIds,
                          int64_t p) {
  ArrayRef<int64_t> layers = layerIds;
  ArrayRef<int64_t> counts = this->layers;
  int64_t n = int64_t(layers.size());
  // By the forward ops' marks.
  std::map<int64_t, std::pair<int64_t, Operation *>> marked; // layer
  for (Operation &op : func.getBody().front().without_terminator()) {
    std::optional<int64_t> stage = getStage(&op);
    if (!stage)
      continue;
    std::optional<int64_t> layer = getLayer(&op);
    if (!layer || !inPhase(&op, Phase::forward))
      return op.emitError() << "par.stage marks the forward ops of a layer "
                               "(par.layer); this op is not one";
    if (*stage >= p)
      return op.emitError()
             << "par.stage = " << *stage << " but the "
             << "pipeline axis '" << axis << "' has " << p
             << (virtualStages > 1 ? " virtual stages" : " stages");
    auto [it, inserted] = marked.try_emplace(*layer, *stage, &op);
    if (!inserted && it->second.first != *stage)
      return op.emitError()
             << "layer " << *layer << " is marked stage " << *stage
             << " here and stage " << it->second.first << " elsewhere";
  }
  if (!marked.empty() && !counts.empty())
    return func.emitError() << "--par-pipeline layers= and par.stage marks "
                               "both place the layers; give one";
  SmallVector<int64_t> first(p, 0);
  if (!marked.empty()) {
    int64_t current = -1;
    for (int64_t layer : layers) {
      auto it = marked.find(layer);
      if (it == marked.end())
        return func.emitError() << "layer " << layer
                                << " has no par.stage mark; mark every "
                                   "layer's forward ops or none";
      auto [stage, op] = it->second;
      if (stage < current)
        return op->emitError() << "layer " << layer << " is marked stage "
                               << stage << " after a layer in stage " << current
                               << ": stages take consecutive layers in order";
      if (stage > current + 1)
        return op->emitError() << "layer " << layer << " is marked stage "
                               << stage << ", skipping stage " << current + 1
                               << ": every stage needs a layer";
      if (stage == current + 1)
        first[stage] = layer;
      current = stage;
    }
    if (current != p - 1)
      return func.emitError() << "the par.stage marks use stages 0-" << current
                              << " of " << p << ": every stage needs a layer";
    return first;
  }
  if (!counts.empty()) {
    int64_t total = 0;
    for (int64_t count : counts)
      total += count;
    if (int64_t(counts.size()) != p ||
        llvm::any_of(counts, [](int64_t c) { return c < 1; }) || total != n)
      return func.emitError()
             << "--par-pipeline layers= gives " << counts.size()
             << " count(s) summing to " << total << "; it needs " << p
             << " positive counts (one per "
             << (virtualStages > 1 ? "virtual stage" : "stage")
             << ") summing to the " << n << " layers";
    int64_t at = 0;
    for (int64_t s = 0; s < p; ++s) {
      first[s] = layers[at];
      at += counts[s];
    }
    return first;
  }
  return balancedFirstLayers(func, layers, p);
}

static LogicalResult splitMicrobatches(func::FuncOp func, int64_t m, bool sum,
                                       bool splitAllSums) {
  if (m == 1)
    return success();
  Block &body = func.getBody().front();
  OpBuilder b(func.getContext());

  // Data arguments take a leading micro-batch dimension; micro-batch i
  // reads slice i.
  SmallVector<BlockArgument> data = dataArguments(func);
  if (data.empty())
    return func.emitError()
           << "--par-pipeline microbatches=" << m << ": @" << func.getSymName()
           << " has no data argument to split";
  // The forward and backward ops that depend on the data, in order.
  llvm::SetVector<Operation *> dependent = dataDependentPasses(func, data);
  b.setInsertionPointToStart(&body);
  SmallVector<Type> argTypes(func.getArgumentTypes());
  SmallVector<SmallVector<std::pair<Value, Value>>> dataOf(m);
  for (BlockArgument arg : data) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      return emitError(arg.getLoc())
             << "--par-pipeline: data argument #" << arg.getArgNumber()
             << " needs a static tensor type";
    SmallVector<int64_t> shape{m};
    llvm::append_range(shape, type.getShape());
    auto whole = RankedTensorType::get(shape, type.getElementType());
    arg.setType(whole);
    argTypes[arg.getArgNumber()] = whole;
    if (auto sharding = func.getArgAttrOfType<ShardingAttr>(
            arg.getArgNumber(), ParDialect::kShardingAttrName)) {
      SmallVector<DimShardingAttr> dims{
          DimShardingAttr::get(func.getContext(), {}, true, std::nullopt)};
      llvm::append_range(dims, sharding.getDims());
      func.setArgAttr(arg.getArgNumber(), ParDialect::kShardingAttrName,
                      ShardingAttr::get(func.getContext(), sharding.getMesh(),
                                        dims, sharding.getReplicatedAxes(),
                                        sharding.getPartialAxes()));
    }
    SmallVector<int64_t> one{1};
    llvm::append_range(one, type.getShape());
    auto sliceType = RankedTensorType::get(one, type.getElementType());
    for (int64_t i = 0; i < m; ++i) {
      SmallVector<int64_t> starts(shape.size(), 0), limits(shape);
      starts[0] = i;
      limits[0] = i + 1;
      auto slice = SliceOp::create(
          b, arg.getLoc(), sliceType, arg, b.getDenseI64ArrayAttr(starts),
          b.getDenseI64ArrayAttr(limits), DenseI64ArrayAttr());
      auto reshape = ReshapeOp::create(b, arg.getLoc(), type, slice);
      for (Operation *op : {slice.getOperation(), reshape.getOperation()}) {
        setPhase(op, Phase::forward);
        setMicrobatch(op, i);
      }
      dataOf[i].push_back({arg, reshape});
    }
  }
  func.setType(
      FunctionType::get(func.getContext(), argTypes, func.getResultTypes()));

  SmallVector<Operation *> ordered(dependent.begin(), dependent.end());

  // What leaves them: values read by the optimizer or returned.
  SmallVector<Value> exits;
  for (Operation *op : ordered)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !dependent.contains(user);
          }))
        exits.push_back(result);
  for (Value exit : exits)
    if (!isa<FloatType>(getElementTypeOrSelf(exit.getType())))
      return exit.getDefiningOp()->emitError()
             << "--par-pipeline: a " << exit.getType()
             << " value leaves the forward and backward passes; only "
                "floating-point values (gradients, losses) can be averaged "
                "over micro-batches";

  // A sum of contributions made in different stages (a tied weight's
  // gradient: the embedding's in the first stage, the head's in the last)
  // is accumulated contribution by contribution, each in its own stage,
  // and added once after the last micro-batch: one transfer per step
  // instead of one per micro-batch.
  auto defStage = [](Value v) -> std::optional<int64_t> {
    Operation *def = v.getDefiningOp();
    return def ? getStage(def) : std::nullopt;
  };
  // The parts of a sum, and the adds between them and it.
  std::function<void(Value, bool, SmallVectorImpl<Value> &,
                     SmallVectorImpl<Operation *> &)>
      terms = [&](Value v, bool top, SmallVectorImpl<Value> &parts,
                  SmallVectorImpl<Operation *> &adds) {
        auto add = v.getDefiningOp<AddOp>();
        bool expand = add && dependent.contains(add) &&
                      (top ? llvm::none_of(v.getUsers(),
                                           [&](Operation *u) {
                                             return dependent.contains(u);
                                           })
                           : v.hasOneUse());
        if (!expand) {
          parts.push_back(v);
          return;
        }
        adds.push_back(add);
        terms(add.getLhs(), false, parts, adds);
        terms(add.getRhs(), false, parts, adds);
      };
  DenseMap<Value, SmallVector<Value>> termsOf;
  llvm::SetVector<Value> accumulated;
  llvm::SmallPtrSet<Operation *, 8> sumTree;
  for (Value exit : exits) {
    SmallVector<Value> parts;
    SmallVector<Operation *> adds;
    terms(exit, true, parts, adds);
    bool split = parts.size() > 1 &&
                 llvm::all_of(parts,
                              [&](Value v) {
                                Operation *def = v.getDefiningOp();
                                return def && dependent.contains(def);
                              }) &&
                 (splitAllSums || llvm::any_of(parts, [&](Value v) {
                    return defStage(v) != defStage(parts.front());
                  }));
    if (!split)
      parts = {exit};
    else
      sumTree.insert(adds.begin(), adds.end());
    for (Value part : parts)
      accumulated.insert(part);
    termsOf[exit] = parts;
  }

  // Micro-batch 0 is the ops as they are, reading slice 0.
  for (auto [arg, slice] : dataOf[0])
    arg.replaceUsesWithIf(slice, [&](OpOperand &use) {
      return dependent.contains(use.getOwner());
    });
  for (Operation *op : ordered)
    setMicrobatch(op, 0);

  // Micro-batches 1.. are copies after them; each exit is accumulated
  // as soon as a micro-batch makes it.
  SmallVector<Operation *> deadCopies;
  llvm::SmallPtrSet<Operation *, 16> accumulation;
  // Low-precision values (bf16 or f16 gradients under mixed precision) are
  // accumulated in f32, as Megatron keeps its main gradients, and their
  // mean converted back once.
  auto widen = [&](Value v, Operation *after, const StepMarks &marks) {
    auto type = cast<RankedTensorType>(v.getType());
    auto element = dyn_cast<FloatType>(type.getElementType());
    if (!element || element.getWidth() >= 32)
      return v;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(after);
    auto wide = ConvertOp::create(b, v.getLoc(), type.clone(b.getF32Type()), v);
    marks.stamp(wide);
    accumulation.insert(wide);
    return Value(wide);
  };
  DenseMap<Value, Value> total;
  for (Value part : accumulated) {
    Operation *def = part.getDefiningOp();
    total[part] = widen(part, def, StepMarks::of(def));
  }
  // The copies go after micro-batch 0's ops and after the conversions
  // made right after them.
  Operation *last = ordered.back();
  for (auto &entry : total)
    if (Operation *def = entry.second.getDefiningOp();
        def && last->isBeforeInBlock(def))
      last = def;
  for (int64_t i = 1; i < m; ++i) {
    // The copies read slice i where micro-batch 0 reads slice 0.
    IRMapping map;
    for (auto [first, slice] : llvm::zip(dataOf[0], dataOf[i]))
      map.map(first.second, slice.second);
    b.setInsertionPointAfter(last);
    for (Operation *op : ordered) {
      Operation *copy = b.clone(*op, map);
      setMicrobatch(copy, i);
      if (sumTree.contains(op))
        deadCopies.push_back(copy);
      // Only the mean below is the gradient the optimizer reads.
      copy->removeAttr(ParDialect::kGradientOfAttrName);
      last = copy;
      for (auto [orig, value] :
           llvm::zip(op->getResults(), copy->getResults())) {
        auto it = total.find(orig);
        if (it == total.end())
          continue;
        StepMarks marks{getPhase(op), getLayer(op), std::nullopt, i};
        Value wide = widen(value, copy, marks);
        if (wide != value)
          last = wide.getDefiningOp();
        auto sum = AddOp::create(b, orig.getLoc(), it->second, wide);
        marks.stamp(sum);
        accumulation.insert(sum);
        it->second = sum;
        last = sum;
      }
    }
  }
  // The mean, read where the micro-batch-0 value was; a sum of parts
  // adds their totals first.
  for (Value exit : exits) {
    Operation *def = exit.getDefiningOp();
    // In the stage of the value they replace (a gradient's: that of its
    // parameter).
    StepMarks marks{getPhase(def), getLayer(def), getStage(def), m - 1};
    ArrayRef<Value> parts = termsOf[exit];
    Operation *last = total[parts.front()].getDefiningOp();
    for (Value part : parts.drop_front())
      if (last->isBeforeInBlock(total[part].getDefiningOp()))
        last = total[part].getDefiningOp();
    b.setInsertionPointAfter(last);
    Value added = total[parts.front()];
    for (Value part : parts.drop_front()) {
      auto add = AddOp::create(b, exit.getLoc(), added, total[part]);
      marks.stamp(add);
      accumulation.insert(add);
      added = add;
    }
    // Shares of a divided batch add up; micro-batches' means average.
    Value mean = added;
    Operation *scale = nullptr;
    if (!sum) {
      auto type = cast<RankedTensorType>(added.getType());
      Value factor = splatConstant(b, exit.getLoc(), type, 1.0 / double(m));
      mean = MulOp::create(b, exit.getLoc(), added, factor);
      scale = factor.getDefiningOp();
      for (Operation *op : {scale, mean.getDefiningOp()})
        marks.stamp(op);
    }
    if (mean.getType() != exit.getType()) {
      mean = ConvertOp::create(b, exit.getLoc(), exit.getType(), mean);
      marks.stamp(mean.getDefiningOp());
    }
    exit.replaceUsesWithIf(mean, [&](OpOperand &use) {
      Operation *owner = use.getOwner();
      return !dependent.contains(owner) && !accumulation.contains(owner) &&
             owner != mean.getDefiningOp() && owner != scale;
    });
    for (int64_t param : getGradientOf(def))
      addGradientOf(mean.getDefiningOp(), param);
    def->removeAttr(ParDialect::kGradientOfAttrName);
  }
  // The sums that the parts replaced, in every micro-batch.
  for (Operation *op : llvm::reverse(deadCopies))
    if (op->use_empty())
      op->erase();
  SmallVector<Operation *> tree(sumTree.begin(), sumTree.end());
  llvm::sort(tree,
             [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
  for (Operation *op : tree)
    if (op->use_empty())
      op->erase();
  return success();
}
