//===- RematPass.cpp - --par-remat: what each layer keeps -----------------===//
//
// `none`, `selective` and `full` apply one mode to every layer. `auto`
// chooses a mode per layer so that the planned per-device peak fits a
// budget with the fewest recomputed FLOPs:
//
// 1. Measure. Each mode is applied to every layer of a copy of the module,
//    which is then propagated, partitioned and scheduled, and its memory
//    planned (partitionedCopy, planMemory): per layer, the activation bytes
//    a device keeps and the FLOPs it recomputes; and, for `none`, the bytes
//    live at every instruction.
// 2. Model. A layer i that recomputes frees what it keeps less, D_i(mode),
//    from the end of its forward ops to the start of its backward ones. On
//    the chain of layers (forward 0..L-1, backward L-1..0), the instructions
//    where layer i's activations are held are exactly those where layers
//    0..k-1 are for some k >= i+1, so each instruction t asks, of the
//    layers before its k(t), savings of at least live(t) - target.
// 3. Choose. A dynamic program over the layers in forward order keeps the
//    Pareto front of (bytes saved so far, FLOPs recomputed so far), drops
//    the states that miss the savings the next prefix needs, and ends with
//    the fewest FLOPs. Exact for the model, and linear in the layers times
//    the front (distinct sums, few for repeated layers), where an integer
//    program would solve the same covering problem without its structure.
// 4. Check. The choice is applied to a copy and planned again; the arena
//    (fragmentation included) must fit. If it does not, the target drops
//    by the excess and the choice is made again. The model counts a
//    layer's savings only until its backward ops start, so it may ask for
//    more than the plan needs: once a choice fits, larger targets (a
//    bisection up to the plain peak) give choices with fewer FLOPs, kept
//    when they fit too. The modes measured on every layer in step 1 are
//    candidates as well; the fitting one with the fewest FLOPs wins.
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/Pipeline.h"
#include "par/Transforms/Remat.h"

#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/CostModel.h"
#include "par/Transforms/MemoryPlan.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/ReportFormat.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#include <map>

#define DEBUG_TYPE "par-remat"

namespace mlir::par {
#define GEN_PASS_DEF_REMATPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The share of a step's FLOPs below which recomputing less is not worth
/// another partitioned check.
constexpr double kNegligibleRecompute = 0.001;

/// Applies `modes` (per function) to a copy of `module`, partitions it and
/// measures each training step.
FailureOr<std::map<std::string, RematMeasurement>>
measure(ModuleOp module, const std::map<std::string, RematModes> &modes,
        StringRef checkpointAxis, bool fuse, std::string &error,
        OwningOpRef<ModuleOp> *keep = nullptr) {
  OwningOpRef<ModuleOp> copy = module.clone();
  for (auto func : copy->getOps<func::FuncOp>()) {
    auto it = modes.find(func.getSymName().str());
    if (it == modes.end())
      continue;
    if (failed(rematerialize(func, it->second))) {
      error = "rematerializing @" + func.getSymName().str() + " failed";
      return failure();
    }
    // Partitioned checkpoints are split by --par-partition, as for real.
    if (!checkpointAxis.empty()) {
      Builder b(func.getContext());
      func->setAttr(ParDialect::kRematAttrName,
                    b.getDictionaryAttr(
                        {b.getNamedAttr("mode", b.getStringAttr("auto")),
                         b.getNamedAttr("checkpoint_axis",
                                        b.getStringAttr(checkpointAxis))}));
    }
  }
  FailureOr<OwningOpRef<ModuleOp>> planned =
      partitionedCopy(std::move(copy), error, /*schedule=*/true, fuse);
  if (failed(planned))
    return failure();
  std::map<std::string, RematMeasurement> result;
  for (auto func : (*planned)->getOps<func::FuncOp>()) {
    if (!modes.count(func.getSymName().str()))
      continue;
    FailureOr<MemoryPlan> plan = planMemory(func, 64);
    if (failed(plan)) {
      error = "the memory plan of @" + func.getSymName().str() + " failed";
      return failure();
    }
    result[func.getSymName().str()] = measureRemat(*plan);
  }
  if (keep)
    *keep = std::move(*planned);
  return result;
}

/// One layer's options: the mode, the bytes it frees and the FLOPs it
/// costs.
struct LayerOption {
  RematMode mode;
  int64_t saved;
  double flops;
};

/// The fewest-FLOPs choice of one option per layer (in forward order)
/// whose savings over each prefix of the layers reach `need[k]` (the
/// savings layers 0..k-1 must make; need.size() == layers + 1). None when
/// no choice does.
std::optional<SmallVector<unsigned>>
choose(ArrayRef<SmallVector<LayerOption>> options, ArrayRef<int64_t> need) {
  struct State {
    int64_t saved;
    double flops;
    int parent;      // index in the previous level
    unsigned option; // of this level's layer
  };
  SmallVector<SmallVector<State>> levels;
  levels.push_back({State{0, 0, -1, 0}});
  for (size_t k = 0; k <= options.size(); ++k) {
    SmallVector<State> &level = levels.back();
    // Only states that free what this prefix needs go on.
    llvm::erase_if(level, [&](const State &s) { return s.saved < need[k]; });
    if (level.empty())
      return std::nullopt;
    if (k == options.size())
      break;
    SmallVector<State> next;
    for (auto [i, state] : llvm::enumerate(level))
      for (auto [o, option] : llvm::enumerate(options[k]))
        next.push_back({state.saved + option.saved, state.flops + option.flops,
                        int(i), unsigned(o)});
    // The Pareto front: fewer FLOPs first, each kept only if it saves more
    // than every state with no more FLOPs.
    llvm::stable_sort(next, [](const State &a, const State &b) {
      return a.flops != b.flops ? a.flops < b.flops : a.saved > b.saved;
    });
    SmallVector<State> front;
    for (const State &s : next)
      if (front.empty() || s.saved > front.back().saved)
        front.push_back(s);
    levels.push_back(std::move(front));
  }
  // The last level is ordered by FLOPs: its first state is the cheapest.
  SmallVector<unsigned> picked(options.size());
  int at = 0;
  for (size_t k = options.size(); k > 0; --k) {
    const State &s = levels[k][at];
    picked[k - 1] = s.option;
    at = s.parent;
  }
  return picked;
}

/// The choice for one training step (step 2 to 4 of the file comment), or
/// none after an error at `func`.
std::optional<RematChoice> chooseModes(
    ModuleOp module, func::FuncOp func,
    std::map<RematMode, std::map<std::string, RematMeasurement>> &byMode,
    int64_t limit, StringRef checkpointAxis, bool fuse,
    OwningOpRef<ModuleOp> *partitioned, int64_t *smallestPeak) {
  std::string name = func.getSymName().str();
  auto measuredPlain = byMode[RematMode::none].find(name);
  if (measuredPlain == byMode[RematMode::none].end()) {
    func.emitError() << "--par-remat=auto: @" << name << " was not measured";
    return std::nullopt;
  }
  const RematMeasurement &plain = measuredPlain->second;
  SmallVector<int64_t> layers = forwardLayers(func);
  auto uniform = [&](RematMode m) {
    RematModes modes;
    for (int64_t layer : layers)
      modes[layer] = m;
    return modes;
  };
  // Nothing to recompute when the plain step fits.
  if (plain.arenaBytes <= limit)
    return RematChoice{uniform(RematMode::none), plain.arenaBytes};

  // 2. Each layer's options.
  SmallVector<SmallVector<LayerOption>> options;
  for (int64_t layer : layers) {
    SmallVector<LayerOption> &of = options.emplace_back();
    of.push_back({RematMode::none, 0, 0});
    for (auto &[m, measured] : byMode) {
      if (m == RematMode::none)
        continue;
      const RematMeasurement &with = measured[name];
      auto kept = [&](const RematMeasurement &x) {
        auto it = x.kept.find(layer);
        return it == x.kept.end() ? int64_t(0) : it->second;
      };
      int64_t saved = kept(plain) - kept(with);
      auto flops = with.flops.find(layer);
      if (saved > 0)
        of.push_back(
            {m, saved, flops == with.flops.end() ? 0.0 : flops->second});
    }
  }
  // Per instruction of the plain plan, the prefix of layers whose
  // activations it holds: layers 0..k-1 in forward order.
  SmallVector<std::pair<int64_t, int64_t>> held; // per position
  for (int64_t layer : layers) {
    auto end = plain.forwardEnd.find(layer);
    auto start = plain.laterStart.find(layer);
    held.push_back({end == plain.forwardEnd.end() ? -1 : end->second,
                    start == plain.laterStart.end() ? -1 : start->second});
  }
  auto prefixAt = [&](int64_t t) {
    size_t k = 0;
    while (k < held.size() && held[k].first < t && t < held[k].second)
      ++k;
    return k;
  };

  int64_t smallest = plain.arenaBytes;
  std::string smallestWhat = "remat none";
  for (auto &[m, measured] : byMode)
    if (measured[name].arenaBytes < smallest) {
      smallest = measured[name].arenaBytes;
      smallestWhat =
          ("remat " + stringifyRematMode(m) + " on every layer").str();
    }
  // 3. The cheapest choice the model says fits `target`.
  struct Choice {
    RematModes modes;
    double flops = 0;
  };
  auto pick = [&](int64_t target) -> std::optional<Choice> {
    // The savings each prefix of the layers needs.
    SmallVector<int64_t> need(layers.size() + 1, 0);
    for (auto [t, bytes] : llvm::enumerate(plain.live)) {
      int64_t over = bytes - target;
      if (over <= 0)
        continue;
      size_t k = prefixAt(int64_t(t));
      if (k == 0)
        return std::nullopt; // no layer's activations are held there
      need[k] = std::max(need[k], over);
    }
    std::optional<SmallVector<unsigned>> picked = choose(options, need);
    if (!picked)
      return std::nullopt;
    Choice choice;
    for (auto [k, layer] : llvm::enumerate(layers)) {
      const LayerOption &option = options[k][(*picked)[k]];
      choice.modes[layer] = option.mode;
      choice.flops += option.flops;
    }
    return choice;
  };
  // 4. Its planned arena, on a partitioned copy.
  std::map<RematModes, int64_t> arenas;
  std::optional<RematModes> partitionedModes;
  auto check = [&](const RematModes &modes) -> FailureOr<int64_t> {
    auto it = arenas.find(modes);
    if (it != arenas.end())
      return it->second;
    std::string error;
    OwningOpRef<ModuleOp> copy;
    FailureOr<std::map<std::string, RematMeasurement>> checked =
        measure(module, {{name, modes}}, checkpointAxis, fuse, error,
                partitioned ? &copy : nullptr);
    if (failed(checked)) {
      func.emitError() << "--par-remat=auto: planning @" << name
                       << " with the chosen modes failed: " << error;
      return failure();
    }
    int64_t arena = (*checked)[name].arenaBytes;
    arenas[modes] = arena;
    // The copy of a choice that fits may be the one chosen.
    if (partitioned && arena <= limit) {
      *partitioned = std::move(copy);
      partitionedModes = modes;
    }
    if (arena > limit && arena < smallest) {
      smallest = arena;
      smallestWhat = "a mix of modes";
    }
    return arena;
  };

  // The modes measured on every layer are choices too.
  std::optional<Choice> best;
  int64_t bestArena = 0;
  for (auto &[m, measured] : byMode) {
    const RematMeasurement &with = measured[name];
    Choice choice{uniform(m), 0};
    for (auto &[layer, flops] : with.flops)
      choice.flops += flops;
    arenas[choice.modes] = with.arenaBytes;
    if (with.arenaBytes <= limit && (!best || choice.flops < best->flops)) {
      best = choice;
      bestArena = with.arenaBytes;
    }
  }
  // Tighten the target by the excess until the program's choice fits.
  int64_t target = limit;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::optional<Choice> choice = pick(target);
    if (!choice)
      break;
    FailureOr<int64_t> arena = check(choice->modes);
    if (failed(arena))
      return std::nullopt;
    LLVM_DEBUG(llvm::dbgs()
               << "target " << target << ": arena " << *arena << "\n");
    if (*arena <= limit) {
      if (!best || choice->flops < best->flops) {
        best = choice;
        bestArena = *arena;
      }
      break;
    }
    target -= *arena - limit;
  }
  if (best) {
    // Then loosen it: the model counts a layer's savings only until its
    // backward ops start, so it may ask for more than the plan needs. A
    // larger target gives a choice with fewer FLOPs, kept if it fits;
    // not worth a check once what is recomputed is a sliver of the step.
    int64_t low = target, high = plain.arenaBytes;
    for (int step = 0; step < 6 && high - low > 64 &&
                       best->flops > kNegligibleRecompute * plain.stepFlops;
         ++step) {
      int64_t mid = low + (high - low) / 2;
      std::optional<Choice> choice = pick(mid);
      if (!choice || choice->flops >= best->flops) {
        low = mid;
        continue;
      }
      FailureOr<int64_t> arena = check(choice->modes);
      if (failed(arena))
        return std::nullopt;
      if (*arena <= limit) {
        best = choice;
        bestArena = *arena;
        low = mid;
      } else {
        high = mid;
      }
    }
    // The kept copy only if it is the chosen mix's.
    if (partitioned && partitionedModes != best->modes)
      *partitioned = nullptr;
    return RematChoice{best->modes, bestArena};
  }
  if (smallestPeak)
    *smallestPeak = std::max(*smallestPeak, smallest);
  func.emitError() << "--par-remat=auto: no choice of what to recompute fits @"
                   << name << " in a budget of " << humanBytes(limit) << " ("
                   << limit
                   << " bytes) per device; the smallest planned peak is "
                   << humanBytes(smallest) << " (" << smallest << " bytes, "
                   << smallestWhat << ")";
  return std::nullopt;
}

struct RematPass : public mlir::par::impl::RematPassBase<RematPass> {
  using RematPassBase::RematPassBase;

  /// `--par-remat=full` and `--par-remat=auto:budget=2GiB` name the mode
  /// first; `--par-remat="mode=auto budget=2GiB"` is the same.
  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    StringRef text = options.trim();
    std::string rewritten = text.str();
    size_t headEnd = text.find_first_of(": =,");
    StringRef head = text.take_front(headEnd);
    if (!head.empty() && (headEnd == StringRef::npos || text[headEnd] != '=')) {
      StringRef rest = text.drop_front(head.size()).ltrim(": ,");
      rewritten = "mode=" + head.str();
      if (!rest.empty())
        rewritten += " " + rest.str();
    }
    // Settings after the mode may also be separated by commas.
    std::replace(rewritten.begin(), rewritten.end(), ',', ' ');
    return Pass::initializeOptions(rewritten, errorHandler);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool isAuto = mode == "auto";
    std::optional<RematMode> fixed = parseRematMode(mode);
    if (!fixed && !isAuto) {
      module.emitError() << "--par-remat: unknown mode '" << mode
                         << "': expected none, selective, full or "
                            "auto[:budget=SIZE]";
      return signalPassFailure();
    }
    if (!checkpointAxis.empty()) {
      if (mode != "full" && mode != "auto") {
        module.emitError() << "--par-remat: checkpoint-axis= applies to modes "
                              "full and auto, not '"
                           << mode << "'";
        return signalPassFailure();
      }
      bool known = llvm::any_of(module.getOps<MeshOp>(), [&](MeshOp mesh) {
        return mesh.getAxisIndex(checkpointAxis) >= 0;
      });
      if (!known) {
        module.emitError() << "--par-remat: checkpoint-axis '" << checkpointAxis
                           << "' is not an axis of the module's mesh";
        return signalPassFailure();
      }
    }
    // par-opt turns auto into on where --par-fuse follows (par-opt.cpp).
    if (fuse != "auto" && fuse != "on" && fuse != "off") {
      module.emitError() << "--par-remat: fuse='" << fuse
                         << "' is not auto, on or off";
      return signalPassFailure();
    }
    if (!isAuto && (!budget.empty() || !hardware.empty())) {
      module.emitError() << "--par-remat: budget= and hardware= apply to "
                            "mode auto, not '"
                         << mode << "'";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> steps;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!isTrainingStep(func))
        continue;
      if (func->hasAttr(ParDialect::kRematAttrName)) {
        func.emitError() << "--par-remat: @" << func.getSymName()
                         << " is already rematerialized ("
                         << func->getAttr(ParDialect::kRematAttrName) << ")";
        return signalPassFailure();
      }
      if (func->hasAttr(ParDialect::kPartitionedAttrName)) {
        func.emitError() << "--par-remat runs before --par-partition; @"
                         << func.getSymName() << " is partitioned";
        return signalPassFailure();
      }
      steps.push_back(func);
    }
    if (steps.empty()) {
      module.emitError() << "--par-remat: no training step in the module "
                            "(run --par-autodiff first)";
      return signalPassFailure();
    }
    if (!isAuto) {
      for (func::FuncOp func : steps) {
        RematModes modes;
        for (int64_t layer : forwardLayers(func))
          modes[layer] = *fixed;
        if (failed(applyRemat(func, modes, mode, std::nullopt, std::nullopt,
                              checkpointAxis)))
          return signalPassFailure();
      }
      return;
    }
    FailureOr<int64_t> limit = budgetBytes();
    if (failed(limit))
      return signalPassFailure();
    FailureOr<std::map<std::string, RematChoice>> chosen =
        planRemat(module, steps, *limit, checkpointAxis, fuse == "on");
    if (failed(chosen))
      return signalPassFailure();
    for (func::FuncOp func : steps) {
      const RematChoice &choice = chosen->at(func.getSymName().str());
      if (failed(applyRemat(func, choice.modes, "auto", *limit, choice.peak,
                            checkpointAxis)))
        return signalPassFailure();
    }
  }

  /// The budget: budget=, else the hardware profile's device memory.
  FailureOr<int64_t> budgetBytes() {
    ModuleOp module = getOperation();
    if (!budget.empty()) {
      std::optional<int64_t> bytes = parseByteSize(budget);
      if (!bytes || *bytes <= 0)
        return module.emitError()
               << "--par-remat: budget '" << budget
               << "' is not a size (40GiB, 512MiB, 80GB or a byte count)";
      return *bytes;
    }
    FailureOr<MachineModel> machine = MachineModel::load(
        hardware, {}, [&] { return module.emitError("--par-remat: "); });
    if (failed(machine))
      return failure();
    if (machine->profile().memoryBytes <= 0)
      return module.emitError() << "--par-remat=auto: hardware profile '"
                                << machine->profile().name
                                << "' gives no device memory; give budget=SIZE";
    return machine->profile().memoryBytes;
  }
};

} // namespace

RematMeasurement mlir::par::measureRemat(const MemoryPlan &plan) {
  RematMeasurement m;
  m.arenaBytes = plan.arenaBytes;
  m.live = liveBytes(plan);
  m.kept = activationsByLayer(plan).byLayer;
  m.flops = recomputedFlops(plan);
  for (Operation *op : plan.instructions)
    if (auto rule = dyn_cast<ShardingRuleOpInterface>(op))
      m.stepFlops += rule.getWork().flops;
  // Where each layer's forward ops end, then where its ops of a later
  // phase start after that (a later-phase op scheduled earlier, one
  // that reads no activation, does not end the span).
  for (auto [t, op] : llvm::enumerate(plan.instructions))
    if (std::optional<int64_t> layer = getLayer(op))
      if (inPhase(op, Phase::forward))
        m.forwardEnd[*layer] = int64_t(t);
  for (auto [t, op] : llvm::enumerate(plan.instructions)) {
    std::optional<int64_t> layer = getLayer(op);
    if (!layer || !getPhase(op) || inPhase(op, Phase::forward) ||
        m.laterStart.count(*layer))
      continue;
    auto end = m.forwardEnd.find(*layer);
    if (end == m.forwardEnd.end() || int64_t(t) > end->second)
      m.laterStart[*layer] = int64_t(t);
  }
  return m;
}

FailureOr<std::map<std::string, RematChoice>>
mlir::par::planRemat(ModuleOp module, ArrayRef<func::FuncOp> steps,
                     int64_t limit, StringRef checkpointAxis, bool fuse,
                     const std::map<std::string, RematMeasurement> *plain,
                     OwningOpRef<ModuleOp> *partitioned,
                     int64_t *smallestPeak) {
  if (partitioned)
    *partitioned = nullptr;
  if (smallestPeak)
    *smallestPeak = 0;
  // A pipelined step is partitioned into one function per stage: its
  // layers' choices are not measured on them.
  for (func::FuncOp func : steps)
    if (getPipeline(func)) {
      func.emitError() << "--par-remat=auto does not measure pipelined "
                          "steps: @"
                       << func.getSymName()
                       << " runs in pipeline stages; give --par-remat a "
                          "mode (none, selective or full) instead";
      return failure();
    }
  // 1. Measure every mode on every layer (`none` is the step as it is: the
  // caller's measurement when it has one; split checkpoints change it).
  std::map<RematMode, std::map<std::string, RematMeasurement>> byMode;
  if (plain && checkpointAxis.empty() &&
      llvm::all_of(steps, [&](func::FuncOp func) {
        return plain->count(func.getSymName().str());
      }))
    for (func::FuncOp func : steps)
      byMode[RematMode::none][func.getSymName().str()] =
          plain->at(func.getSymName().str());
  for (RematMode m : {RematMode::none, RematMode::selective, RematMode::full}) {
    if (byMode.count(m))
      continue;
    std::map<std::string, RematModes> all;
    bool differs = m != RematMode::selective;
    for (func::FuncOp func : steps) {
      // Every step is measured, those without layers too.
      RematModes &modes = all[func.getSymName().str()];
      for (int64_t layer : forwardLayers(func))
        modes[layer] = m;
      differs |= !attentionCoreLayers(func).empty();
    }
    if (!differs)
      continue; // selective would keep what none keeps
    std::string error;
    FailureOr<std::map<std::string, RematMeasurement>> measured =
        measure(module, all, checkpointAxis, fuse, error);
    if (failed(measured))
      return module.emitError()
             << "--par-remat=auto: planning the module with remat "
             << stringifyRematMode(m) << " on every layer failed: " << error;
    byMode[m] = std::move(*measured);
  }
  std::map<std::string, RematChoice> chosen;
  for (func::FuncOp func : steps) {
    std::optional<RematChoice> choice =
        chooseModes(module, func, byMode, limit, checkpointAxis, fuse,
                    steps.size() == 1 ? partitioned : nullptr, smallestPeak);
    if (!choice) {
      if (partitioned)
        *partitioned = nullptr;
      return failure();
    }
    chosen[func.getSymName().str()] = *choice;
  }
  return chosen;
}

LogicalResult mlir::par::applyRemat(func::FuncOp func, const RematModes &modes,
                                    StringRef asked,
                                    std::optional<int64_t> budget,
                                    std::optional<int64_t> peak,
                                    StringRef checkpointAxis) {
  if (failed(rematerialize(func, modes)))
    return failure();
  Builder b(func.getContext());
  SmallVector<int64_t> layers;
  SmallVector<Attribute> names;
  for (int64_t layer : forwardLayers(func)) {
    auto it = modes.find(layer);
    layers.push_back(layer);
    names.push_back(b.getStringAttr(
        stringifyRematMode(it == modes.end() ? RematMode::none : it->second)));
  }
  SmallVector<NamedAttribute> record{
      b.getNamedAttr("mode", b.getStringAttr(asked)),
      b.getNamedAttr("layers", b.getDenseI64ArrayAttr(layers)),
      b.getNamedAttr("modes", b.getArrayAttr(names))};
  if (budget)
    record.push_back(b.getNamedAttr("budget", b.getI64IntegerAttr(*budget)));
  if (peak)
    record.push_back(b.getNamedAttr("peak", b.getI64IntegerAttr(*peak)));
  if (!checkpointAxis.empty())
    record.push_back(
        b.getNamedAttr("checkpoint_axis", b.getStringAttr(checkpointAxis)));
  func->setAttr(ParDialect::kRematAttrName, b.getDictionaryAttr(record));
  return success();
}

SmallVector<func::FuncOp> mlir::par::openTrainingSteps(ModuleOp module) {
  SmallVector<func::FuncOp> steps;
  for (auto func : module.getOps<func::FuncOp>())
    if (isTrainingStep(func) && !func->hasAttr(ParDialect::kRematAttrName))
      steps.push_back(func);
  return steps;
}
