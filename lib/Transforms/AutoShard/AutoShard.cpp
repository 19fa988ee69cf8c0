//===- AutoShard.cpp - --auto-shard: shardings chosen by a cost model -----===//
//
// Chooses a sharding for every value of each function on the module's mesh
// and writes it (closed), with a sharding constraint wherever an op reads a
// value in another layout than the one it is produced in: the propagate and
// partition passes that follow then do exactly what was planned.
//
// The search is an integer program per mesh axis, largest axis first (ties
// in mesh order), each solved exactly with COIN-OR CBC given the axes
// already placed: every op chooses which factor of its rule the axis
// splits (or none), every argument which dim; an op's cost is its compute
// time under the split (its work over the rule's points per device), an
// edge's the time of the reshard (planReshard, priced by the hardware
// profile) between the producer's layout and the one the consumer needs,
// linearized with one variable per pair of layouts (Alpa's formulation);
// a row bounds the per-device memory the plan keeps (arguments, gradients,
// activations). User shardings are constraints. docs/auto-shard.md.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/CostModel.h"
#include "par/Transforms/Fusion.h"
#include "par/Transforms/MemoryPlan.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/Pipeline.h"
#include "par/Transforms/Remat.h"
#include "par/Transforms/SequenceVariant.h"
#include "par/Transforms/ShortenedStep.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"

#include <coin/Cbc_C_Interface.h>

#include <limits>
#include <map>
#include <set>

namespace mlir::par {
#define GEN_PASS_DEF_AUTOSHARDPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

using Axes = SmallVector<int32_t, 2>;

/// A tensor of the function: an argument or an op result.
struct Tensor {
  Value value;
  RankedTensorType type;
  /// The node that produces it, and which of its outputs it is.
  int32_t node = -1;
  unsigned output = 0;
  /// A user's sharding: the axes it puts on each dim (and partial), which
  /// the plan must reproduce.
  std::optional<ReshardLayout> pinned;
  /// Per dim of `pinned`: open (`?`), so the plan may add axes the user did
  /// not place elsewhere.
  SmallVector<bool> pinnedOpen;
  /// A constant: any layout is free (each device builds its piece).
  bool constant = false;
  /// Parameter (persists with a gradient), or a forward value the backward
  /// pass reads (an activation).
  bool parameter = false, activation = false;
  /// An argument some op's result is the gradient of (par.gradient_of).
  bool hasGradient = false;
  /// Where the step has buckets (par.bucket_bytes), what travels in them
  /// with others' (--par-combine-collectives): a gradient's reductions, a
  /// parameter's (or its working copy's) gathers.
  bool gradient = false, gatheredInBuckets = false;
  /// Of an argument, the element types its gradient and its working copy
  /// (par.copy_of, the low-precision copy ZeRO gathers) travel in; null
  /// for its own.
  Type gradientElement, workingElement;
  /// Planned for a fused program: the groups of --par-fuse (indices) that
  /// read it as a register, and whether it still goes through memory (a
  /// reader outside those groups, or a result of the function).
  SmallVector<int32_t, 1> registerIn;
  bool materialized = true;
  /// Whether a plan can leave it a partial sum: made by a split sum
  /// reduction, or by a linear op carrying its operands' partial sums.
  bool mayBePartial = false;
};

/// Who reads a tensor in a layout of their choosing.
struct Use {
  int32_t node;   // consumer node, or -1 for a function result
  unsigned input; // the consumer's operand slot
  ReshardLayout fixed;
  /// A function result without a sharding: returned in the layout it is
  /// made in, its pending sums added (as propagation leaves it).
  bool asMade = false;
  /// An op's operand (not a function result, nor an update of an argument).
  bool byOp() const { return node >= 0 && input != ~0u; }
};

/// An op with a sharding rule, or an argument (a node with one output and
/// one "factor" per dim).
struct Node {
  Operation *op = nullptr; // null for an argument
  int32_t argTensor = -1;
  /// Shared by the copies of a planner (the rule does not change).
  std::shared_ptr<const ShardingRule> rule;
  OpWork work;
  Type elementType;
  SmallVector<int32_t> inputs, outputs; // tensor ids (-1: not a tensor)
  /// Per input, whether one run reads only a result's worth of it
  /// (readsResultWorth).
  SmallVector<bool> readsResultWorth;
  /// The axes each factor (each dim, for an argument) is split over so far.
  SmallVector<Axes> factorAxes;
  /// Of an op linear in its operands (LinearOpInterface) whose partial
  /// sums --par-sink-partials resolves after it instead of before: how it
  /// is linear, and in which operands (empty: it carries no sums).
  Linearity linearity = Linearity::None;
  SmallVector<bool> linearInputs;
  /// The axes over which it runs on partial sums (its carried operands
  /// and its result partial over them), and which operands those are
  /// (a carry choice, below).
  Axes carried;
  int64_t carry = 0;
  /// Candidates for the axis being placed: -1 (none), a factor, or a
  /// carry choice (kCarryAll, kCarryOperand - k).
  SmallVector<int64_t> choices;
  int64_t chosen = -1;
  /// The node whose choices this one shares (itself for a representative),
  /// and for a representative how many nodes share them.
  int32_t rep = -1;
  int64_t copies = 1;
  /// Planned for a fused program: the group of --par-fuse the op runs in
  /// (-1: none), and whether it runs a kernel of its own (not a member of
  /// a group but its root, nor a broadcast every reader copies in).
  int32_t group = -1;
  bool ownKernel = true;
};

/// Distinct layouts of one tensor, each with the choices that give it.
using LayoutChoices =
    llvm::MapVector<std::string, std::pair<ReshardLayout, SmallVector<int>>,
                    std::map<std::string, unsigned>>;

/// The cost of a move that does not exist (a value made partial): large
/// enough never to be chosen, small enough to keep the program well scaled.
constexpr double kImpossible = 1e6;

/// Choices that split nothing over the axis but carry a partial sum over
/// it through a linear op: every operand of an op linear in all of them
/// together (a sum), or operand k (kCarryOperand - k) of one linear in
/// each operand alone.
constexpr int64_t kCarryAll = -2, kCarryOperand = -3;
bool isCarry(int64_t choice) { return choice <= kCarryAll; }
/// Takes `axis` off where `node` has it: factor `from`, or the sums it
/// carries (a carry choice).
void dropAxis(Node &node, int64_t from, int32_t axis) {
  if (from >= 0)
    llvm::erase(node.factorAxes[from], axis);
  else if (isCarry(from))
    llvm::erase(node.carried, axis);
}
/// Whether carry choice `carry` of `node` makes operand `slot` partial.
bool carriesInput(const Node &node, int64_t carry, unsigned slot) {
  if (!isCarry(carry) || slot >= node.linearInputs.size())
    return false;
  return carry == kCarryAll ? node.linearInputs[slot]
                            : int64_t(slot) == kCarryOperand - carry;
}

/// Solutions by program: the program of one axis recurs across the plans of
/// a run (the ZeRO stages of one module, a variant whose changes do not
/// reach this axis), and CBC's answer to the same program is the same.
/// Keyed by the whole program, so a program is never mistaken for another.
using SolvedPrograms =
    std::map<std::vector<double>,
             std::optional<std::pair<std::vector<double>, double>>>;

/// CBC's node limit for a program's branch try, unless branch-nodes= says
/// otherwise (the pass option's default).
constexpr int64_t kBranchNodes = 200;

/// A 0-1 program built in memory and handed to CBC whole (adding rows and
/// columns to a CBC model one by one copies it each time).
class IntegerProgram {
  /// How CBC is run on a program, in this order until one proves it
  /// optimal (or infeasible); see solveWith.
  enum class Try { Root, Branch, Whole };

public:
  /// The branch try's node limit (branch-nodes=; 0: no branch try).
  int64_t branchNodes = kBranchNodes;
  int addColumn(double cost, bool integer) {
    objective.push_back(cost);
    integers.push_back(integer);
    columnEntries.emplace_back();
    return int(objective.size() - 1);
  }
  /// sense: 'E' (= rhs) or 'L' (<= rhs).
  void addRow(ArrayRef<int> columns, ArrayRef<double> coefs, char sense,
              double rhs) {
    int row = int(rowLower.size());
    rowLower.push_back(sense == 'E' ? rhs : -COIN_DBL_MAX_VALUE);
    rowUpper.push_back(rhs);
    for (auto [column, coef] : llvm::zip(columns, coefs))
      columnEntries[column].push_back({row, coef});
  }
  double &cost(int column) { return objective[column]; }
  /// A row the caller drops and solves again without where no solution
  /// meets it (the memory row): pruning must hold without it too.
  std::optional<int> relaxableRow;
  int numRows() const { return int(rowLower.size()); }
  /// Rules out `column` (it stays 0).
  void forbid(int column) { addRow({column}, {1.0}, 'L', 0); }
  size_t numColumns() const { return objective.size(); }

  /// Solves to optimality: the column values and the objective, or
  /// nullopt when the program has no solution. A program solved before in
  /// `solved` is answered from there. With `cutoff`, a program whose
  /// relaxation at the root already costs more than it is not solved: its
  /// bound (a lower bound of its optimum) goes into `prunedAt`, and the
  /// answer is nullopt.
  std::optional<std::pair<std::vector<double>, double>>
  solve(SolvedPrograms &solved, std::optional<double> cutoff = std::nullopt,
        std::optional<double> *prunedAt = nullptr) const {
    if (objective.empty())
      return std::make_pair(std::vector<double>(), 0.0);
    std::vector<CoinBigIndex> start = {0};
    std::vector<int> index;
    std::vector<double> value;
    for (const auto &entries : columnEntries) {
      for (auto [row, coef] : entries) {
        index.push_back(row);
        value.push_back(coef);
      }
      start.push_back(CoinBigIndex(index.size()));
    }
    // Costs in microseconds: the solver's tolerances are absolute.
    std::vector<double> scaled(objective);
    for (double &cost : scaled)
      cost *= 1e6;
    // The key: every list's length, then its entries (column and row
    // numbers are exact as doubles).
    std::vector<double> key;
    auto add = [&](const auto &list) {
      key.push_back(double(list.size()));
      key.insert(key.end(), list.begin(), list.end());
    };
    add(scaled);
    add(start);
    add(index);
    add(value);
    add(rowLower);
    add(rowUpper);
    add(integers);
    auto known = solved.find(key);
    if (known != solved.end())
      return known->second;
    std::optional<double> bound;
    auto answer = solveWith(start, index, value, scaled, cutoff, bound);
    if (bound) {
      // Not solved: a later plan may need its optimum.
      if (prunedAt)
        *prunedAt = bound;
      return std::nullopt;
    }
    solved[std::move(key)] = answer;
    return answer;
  }

private:
  std::optional<std::pair<std::vector<double>, double>>
  solveWith(const std::vector<CoinBigIndex> &start,
            const std::vector<int> &index, const std::vector<double> &value,
            const std::vector<double> &scaled, std::optional<double> cutoff,
            std::optional<double> &prunedAt) const {
    // These programs' relaxations are mostly integral at the root, where
    // CBC's preprocessing and cuts cost more than they save (the 12
    // programs of a 96-layer GPT on 8x8: 1.65 s with them, 0.95 s without,
    // none branching). So the first try, without them, stops after the
    // root node. A program it does not prove optimal (one that needs
    // branching: its memory row binds) is branched on with preprocessing
    // (a pipelined GPT-175B on 128x8 took 3.1 s without it, 1.6 s with it)
    // and of the cuts, probing alone: the others cost more than the nodes
    // they save on most such programs (bench/README.md, "CBC without
    // cutting planes": 31 s against 89 s over ten cases), probing less
    // ("Probing in the branch try": 21 s against 28 s), up to branchNodes
    // nodes. Where that does not prove it either, it is solved whole, with
    // CBC's cuts and no node limit: some programs find no solution without
    // cuts (GPT-tiny's step for 2x2 on a slow-compute profile branched 2
    // minutes without one, where cuts prove it in 11 nodes). Node limits,
    // not time limits, keep the result deterministic.
    for (Try attempt : {Try::Root, Try::Branch, Try::Whole}) {
      if (attempt == Try::Branch && branchNodes <= 0)
        continue;
      Cbc_Model *model = Cbc_newModel();
      llvm::scope_exit release([&] { Cbc_deleteModel(model); });
      load(model, start, index, value, scaled, attempt);
      Cbc_solve(model);
      if (Cbc_isProvenInfeasible(model))
        return std::nullopt;
      if (!Cbc_isProvenOptimal(model)) {
        // The root's bound (its relaxation, no cuts) is over the cutoff:
        // branching would only prove an optimum above it.
        double bound = Cbc_getBestPossibleObjValue(model) / 1e6;
        if (attempt == Try::Root && cutoff && bound > *cutoff) {
          // Where no solution met the relaxable row, the program would be
          // solved again without it: its optimum then is bounded by the
          // root without that row, which must be over the cutoff too.
          std::optional<double> without =
              relaxableRow
                  ? rootBoundWithout(*relaxableRow, start, index, value, scaled)
                  : std::optional<double>(bound);
          if (without && *without > *cutoff) {
            prunedAt = std::min(bound, *without);
            return std::nullopt;
          }
        }
        // Not proven within the try's node limit: the next try.
        if (attempt != Try::Whole)
          continue;
        return std::nullopt;
      }
      const double *solution = Cbc_getColSolution(model);
      return std::make_pair(
          std::vector<double>(solution, solution + objective.size()),
          Cbc_getObjValue(model) / 1e6);
    }
    return std::nullopt;
  }

  /// The bound at the root (no cuts) of the program with `row` dropped;
  /// none where it has no solution even so.
  std::optional<double>
  rootBoundWithout(int row, const std::vector<CoinBigIndex> &start,
                   const std::vector<int> &index,
                   const std::vector<double> &value,
                   const std::vector<double> &scaled) const {
    std::vector<double> upper(rowUpper);
    upper[row] = COIN_DBL_MAX_VALUE;
    Cbc_Model *model = Cbc_newModel();
    llvm::scope_exit release([&] { Cbc_deleteModel(model); });
    load(model, start, index, value, scaled, Try::Root, &upper);
    Cbc_solve(model);
    if (Cbc_isProvenInfeasible(model))
      return std::nullopt;
    return (Cbc_isProvenOptimal(model) ? Cbc_getObjValue(model)
                                       : Cbc_getBestPossibleObjValue(model)) /
           1e6;
  }

  /// Loads the program into `model`, CBC set up for `attempt` (see
  /// solveWith); with `rowUppers`, the rows' upper bounds from there.
  void load(Cbc_Model *model, const std::vector<CoinBigIndex> &start,
            const std::vector<int> &index, const std::vector<double> &value,
            const std::vector<double> &scaled, Try attempt,
            const std::vector<double> *rowUppers = nullptr) const {
    std::vector<double> lower(objective.size(), 0.0),
        upper(objective.size(), 1.0);
    Cbc_setLogLevel(model, 0);
    // No primal heuristics (feasibility pump, rounding, diving): these
    // programs' relaxations are nearly integral, and branch and bound
    // reaches the optimum sooner without them (a pipelined 6.7B plan's
    // program for 1,024 devices: 2.0 s with them, 0.8 s without; the same
    // optimum either way).
    Cbc_setParameter(model, "heuristicsOnOff", "off");
    // Optimal to a relative gap of 1e-9, far below what the costs resolve:
    // CBC's default gap is absolute (1e-10), under a double's resolution
    // of these programs' objectives where they are large (1.2e10 us for a
    // step on a slow profile), and it then branched on after finding the
    // optimum.
    Cbc_setParameter(model, "ratioGap", "1e-9");
    switch (attempt) {
    case Try::Root:
      Cbc_setParameter(model, "preprocess", "off");
      Cbc_setParameter(model, "cutsOnOff", "off");
      Cbc_setMaximumNodes(model, 1);
      break;
    case Try::Branch:
      // Of the cut generators, probing alone: it fixes choices the memory
      // row rules out and tightens the bound where that row binds (ten
      // programs that branch: 21 s of CBC with it, 28 s without).
      Cbc_setParameter(model, "cutsOnOff", "off");
      Cbc_setParameter(model, "probingCuts", "on");
      Cbc_setMaximumNodes(
          model,
          int(std::min<int64_t>(branchNodes, std::numeric_limits<int>::max())));
      break;
    case Try::Whole:
      break;
    }
    Cbc_loadProblem(model, int(objective.size()), int(rowLower.size()),
                    start.data(), index.data(), value.data(), lower.data(),
                    upper.data(), scaled.data(), rowLower.data(),
                    (rowUppers ? *rowUppers : rowUpper).data());
    for (auto [column, integer] : llvm::enumerate(integers))
      if (integer)
        Cbc_setInteger(model, int(column));
  }

  static constexpr double COIN_DBL_MAX_VALUE =
      std::numeric_limits<double>::max();
  std::vector<double> objective, rowLower, rowUpper;
  std::vector<bool> integers;
  std::vector<SmallVector<std::pair<int, double>, 4>> columnEntries;
};

/// What an axis may split: anything, or only the data inputs (data
/// parallel: parameters and their states stay whole over it), or only the
/// parameters (tensor parallel: the data inputs stay whole).
/// Pipeline: the axis of a pipelined step's stages (docs/pipelines.md):
/// nothing splits over it.
enum class AxisUse { Free, Data, Tensor, Pipeline };

/// Bytes of `type` laid out as `layout` on one device.
static int64_t localBytes(ArrayRef<int64_t> axisSizes, RankedTensorType type,
                          const ReshardLayout &layout) {
  return bytesOf(localShape(axisSizes, type.getShape(), layout),
                 type.getElementType());
}

/// Per-device bytes a plan keeps, by the memory report's categories, and
/// the part of each that a ZeRO stage over the data axis would divide (what
/// the plan does not already split over it). A pipelined step keeps them
/// per position on its pipeline axis (its stages' parameters, and the
/// activations of the micro-batches a 1F1B schedule holds there at once);
/// the plan needs the largest.
struct Footprint {
  struct Device {
    int64_t weights = 0, gradients = 0, states = 0, other = 0;
    int64_t zeroWeights = 0, zeroGradients = 0, zeroStates = 0;
  };
  SmallVector<Device, 1> devices{Device()};
  /// What a ZeRO stage changes in the step's time, for the weights it
  /// divides. Every stage (`shardSeconds`): a gradient reduce-scattered
  /// instead of all-reduced, its update on a shard instead of the whole;
  /// or, where the plan already updates a shard (and gathers the result),
  /// that gather gone. Stages 1 and 2 (`updateGatherSeconds`): the updated
  /// shards gathered, in buckets. Stage 3 (`gatherSeconds`): the weights
  /// gathered before their uses, forward and backward.
  double shardSeconds = 0, updateGatherSeconds = 0, gatherSeconds = 0;
  int64_t dataSize = 1;

  int64_t bytes(int64_t stage) const {
    auto divided = [&](int64_t part) { return part - part / dataSize; };
    int64_t most = 0;
    for (const Device &d : devices) {
      int64_t total = d.weights + d.gradients + d.states + d.other;
      if (stage >= 1)
        total -= divided(d.zeroStates);
      if (stage >= 2)
        total -= divided(d.zeroGradients);
      if (stage >= 3)
        total -= divided(d.zeroWeights);
      most = std::max(most, total);
    }
    return most;
  }
  double extraSeconds(int64_t stage) const {
    if (stage <= 0)
      return 0;
    return shardSeconds + (stage >= 3 ? gatherSeconds : updateGatherSeconds);
  }
};

/// What the plans of one run (one mesh, one profile) share: seconds of a
/// reshard by (shape and element type, from, to), since the same move of
/// the same tensor type recurs in every layer and in every plan; and the
/// integer programs solved.
struct PlanningCache {
  llvm::StringMap<double> reshardSeconds;
  /// Seconds of an op's local form by op and layouts (localFormSeconds);
  /// none where the lone op did not partition.
  llvm::StringMap<std::optional<double>> localForms;
  SolvedPrograms programs;
  void clear() {
    reshardSeconds.clear();
    localForms.clear();
    programs.clear();
  }
};

class Planner {
public:
  /// With `fuse`, the plan is costed as --par-fuse will run it: an
  /// element-wise group reads its inputs and writes its result once.
  Planner(func::FuncOp func, MeshOp mesh, const MachineModel &machine,
          int64_t memoryLimit, ArrayRef<AxisUse> axisUses, PlanningCache &cache,
          bool fuse)
      : func(func), mesh(mesh), machine(machine), memoryLimit(memoryLimit),
        axisUses(axisUses), cache(cache), fuse(fuse) {}
  /// A planner of `func`, a copy of the function `prototype` was built on
  /// (`mapping` takes that function's values and ops to `func`'s), under
  /// `axisUses`: it starts from the prototype's graph and clusters, which
  /// do not depend on the axes' uses, instead of building them again.
  Planner(const Planner &prototype, func::FuncOp func, MeshOp mesh,
          const IRMapping &mapping, ArrayRef<AxisUse> axisUses,
          int64_t memoryLimit)
      : Planner(prototype) {
    this->func = func;
    this->memoryLimit = memoryLimit;
    this->mesh = mesh;
    this->axisUses.assign(axisUses.begin(), axisUses.end());
    tensorOf.clear();
    for (auto [t, tensor] : llvm::enumerate(tensors)) {
      tensor.value = mapping.lookup(tensor.value);
      tensorOf[tensor.value] = int32_t(t);
    }
    for (Node &node : nodes)
      if (node.op)
        node.op = mapping.lookup(node.op);
  }

  LogicalResult build();
  /// Finds repeated structure (the layers of a model, forward, backward and
  /// optimizer alike): nodes of one op with the same attributes and types
  /// whose operands come from nodes that are themselves copies share their
  /// choices, so each integer program is as large as one copy.
  void cluster();
  /// Places every axis of more than one device; fails with a diagnostic,
  /// or without one where the plan is pruned (`prunedAt`).
  LogicalResult solve();
  /// A predicted time above which the plan is not wanted: the last axis's
  /// program, when its relaxation at the root shows the step slower than
  /// this, is not solved, and `prunedAt` says how slow at least.
  std::optional<double> pruneAbove;
  std::optional<double> prunedAt;
  /// CBC's node limit for a program's branch try (IntegerProgram).
  int64_t branchNodes = kBranchNodes;
  void writeBack();
  /// Records on each value what its layout beat (`par.planned`): called
  /// for the chosen plan only, after writeBack.
  void writeRecords();
  /// Per node, the best single change of the plan at it, the plan's other
  /// choices held: one axis moved to another factor (dim) or dropped.
  struct Move {
    int32_t axis = -1; // -1: the node has no other layout
    int64_t from = -1, to = -1;
    /// Seconds and per-device bytes it adds per step at this node (one
    /// copy of a repeated layer).
    double seconds = 0;
    int64_t bytes = 0;
  };
  std::vector<Move> bestMoves();
  /// The role of each axis (data, tensor, unused) from what it splits.
  SmallVector<std::string> axisRoles() const;
  /// What the plan keeps per device, with ZeRO over `dataAxis` (if any).
  Footprint footprint(std::optional<int32_t> dataAxis);
  double predictedSeconds = 0;
  func::FuncOp function() const { return func; }
  /// The seconds `op` computes for as planned (0 for an op it did not
  /// plan): what the integer program priced it at. Copies of a node cost
  /// alike (the same op on the same layouts) unless fusion tells them
  /// apart: each is priced once.
  double opSeconds(Operation *op) {
    if (op->getNumResults() == 0)
      return 0;
    auto it = tensorOf.find(op->getResult(0));
    if (it == tensorOf.end() || !nodes[tensors[it->second].node].op)
      return 0;
    int32_t n = tensors[it->second].node;
    int32_t key = fuse ? n : nodes[n].rep;
    if (secondsAsPlanned.size() != nodes.size())
      secondsAsPlanned.assign(nodes.size(), -1.0);
    if (secondsAsPlanned[key] < 0)
      secondsAsPlanned[key] = nodeSeconds(nodes[n], -1, -1);
    return secondsAsPlanned[key];
  }

private:
  int64_t axisSize(int32_t axis) const { return machine.axisSizes()[axis]; }
  /// Layout of one input or output of `node` with `extra` axis on factor
  /// `choice` (-1: no extra axis).
  ReshardLayout layoutOf(const Node &node, bool output, unsigned slot,
                         int32_t extra, int64_t choice) const;
  int64_t shardsOf(const Axes &axes) const {
    int64_t n = 1;
    for (int32_t axis : axes)
      n *= axisSize(axis);
    return n;
  }
  void candidates(Node &node, int32_t axis);
  /// Whether `node` may run on partial sums (Node::linearInputs) and may
  /// leave its results partial (Tensor::mayBePartial).
  void markLinear(Node &node);
  /// Marks the groups --par-fuse makes: their inner values as registers,
  /// their members but the root as running in the root's kernel.
  void markFusion();
  double nodeSeconds(const Node &node, int32_t axis, int64_t choice) const;
  /// The seconds of `node`'s op as its per-device form runs with `axis` on
  /// `choice`: the op alone, its operands and results in their layouts,
  /// partitioned and priced as a check prices it (compute and the
  /// collectives inside the form). Once per run for each op and layouts;
  /// none when the lone op does not partition.
  std::optional<double> localFormSeconds(const Node &node, int32_t axis,
                                         int64_t choice) const;
  int64_t nodeBytes(const Node &node, int32_t axis, int64_t choice) const;
  double reshardSeconds(const Tensor &tensor, const ReshardLayout &from,
                        const ReshardLayout &to);
  /// Whether an op can read `tensor`, made in layout `from`, as its
  /// operand in layout `to`. An operand the op carries partial takes the
  /// partial sums as they are made: --par-sink-partials adds them after
  /// the op only when nothing else moves.
  static bool readable(const Tensor &tensor, const ReshardLayout &from,
                       const ReshardLayout &to) {
    return to.partial.empty() || from == to || tensor.constant;
  }
  /// reshardSeconds into an op's operand (kImpossible where the op cannot
  /// read it so).
  double operandSeconds(const Tensor &tensor, const ReshardLayout &from,
                        const ReshardLayout &to) {
    return readable(tensor, from, to) ? reshardSeconds(tensor, from, to)
                                      : kImpossible;
  }
  /// The step's bucket for a value of `tensor`'s type whose gathers
  /// (`gathers`) or reductions travel in it; none where the step has none.
  std::optional<Bucket> bucketFor(const Tensor &tensor, bool gathers) const {
    if (bucketBytes <= 0)
      return std::nullopt;
    return Bucket{bucketBytes, tensor.type.getRank(), gathers};
  }
  /// The bucket `tensor`'s own moves travel in: a gradient's reductions,
  /// a parameter's gathers (--par-combine-collectives).
  std::optional<Bucket> bucketOf(const Tensor &tensor) const {
    if (!tensor.gradient && !tensor.gatheredInBuckets)
      return std::nullopt;
    return bucketFor(tensor, tensor.gatheredInBuckets);
  }
  /// Seconds of moving a value of `type`, carried in `element`, from one
  /// layout to another as the reshard planner would, in `bucket` if given;
  /// with `splitsGroup`, plus the write and read of a fused group split at
  /// it. Priced once per run (cache.reshardSeconds).
  double moveSeconds(RankedTensorType type, Type element,
                     const ReshardLayout &from, const ReshardLayout &to,
                     const std::optional<Bucket> &bucket,
                     bool splitsGroup = false);
  /// Places `axis`; with `cutoff`, prunes the plan (`prunedAt`) where the
  /// axis's program shows the step slower than that.
  LogicalResult solveAxis(int32_t axis,
                          std::optional<double> cutoff = std::nullopt);
  /// The seconds `node` costs with `axis` on `choice` (its other axes as
  /// planned): its compute and the reshards of what it reads and of what
  /// reads it, every other node as planned.
  double localSeconds(const Node &node, int32_t n, int32_t axis,
                      int64_t choice);
  /// The bucket latency the plan's estimate leaves out: a value in a bucket
  /// pays the share of one bucket's latency its bytes fill, which adds up
  /// to whole buckets only where a group's values of one kind fill them.
  /// Where the step's values travelling on one group (by collective and
  /// axes) fill less than a bucket, the bucket still pays all its latency.
  double partlyFilledBucketSeconds() const;
  /// The layout reader `use` needs, as planned, of a tensor `produced` in
  /// that layout.
  ReshardLayout neededLayout(const Use &use,
                             const ReshardLayout &produced) const;
  ShardingAttr toAttr(const ReshardLayout &layout) const;

  mutable func::FuncOp func;
  mutable MeshOp mesh;
  const MachineModel &machine;
  int64_t memoryLimit;
  SmallVector<AxisUse> axisUses;
  /// The axes placed so far, in order.
  SmallVector<int32_t> placed;
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;
  /// Per tensor, its readers, and per argument node, the returned values
  /// that update it: made by build(), shared by the planner's copies.
  using UseLists = std::vector<SmallVector<Use, 2>>;
  using UpdateLists = std::vector<SmallVector<int32_t, 1>>;
  std::shared_ptr<UseLists> useLists = std::make_shared<UseLists>();
  std::shared_ptr<UpdateLists> updateLists = std::make_shared<UpdateLists>();
  const UseLists &uses() const { return *useLists; }
  const UpdateLists &updates() const { return *updateLists; }
  llvm::DenseMap<Value, int32_t> tensorOf;
  /// opSeconds per node (or representative), once planned (-1: not yet).
  std::vector<double> secondsAsPlanned;
  PlanningCache &cache;
  /// The step's gradient bucket size (par.bucket_bytes; 0: none).
  int64_t bucketBytes = 0;
  bool fuse;
};

std::string layoutKey(const ReshardLayout &layout) {
  std::string key;
  for (const auto &dim : layout.dims) {
    for (int32_t axis : dim)
      key += std::to_string(axis) + ",";
    key += "|";
  }
  key += "p";
  for (int32_t axis : layout.partial)
    key += std::to_string(axis) + ",";
  return key;
}

/// A user's sharding as axis indices of `mesh`.
std::optional<ReshardLayout> pinnedLayout(ShardingAttr sharding, MeshOp mesh) {
  if (!sharding)
    return std::nullopt;
  ReshardLayout layout;
  for (DimShardingAttr dim : sharding.getDims()) {
    layout.dims.emplace_back();
    for (StringAttr axis : dim.getAxes())
      layout.dims.back().push_back(int32_t(mesh.getAxisIndex(axis)));
  }
  for (StringAttr axis : sharding.getPartialAxes())
    layout.partial.push_back(int32_t(mesh.getAxisIndex(axis)));
  return layout;
}

LogicalResult Planner::build() {
  Block &body = func.getBody().front();
  // Room for every node and tensor at once (they are large to move).
  size_t ops = 0, values = body.getNumArguments();
  for (Operation &op : body.without_terminator()) {
    ++ops;
    values += op.getNumResults();
  }
  nodes.reserve(body.getNumArguments() + ops);
  tensors.reserve(values);
  auto addTensor = [&](Value value, int32_t node, unsigned output,
                       Location loc) -> FailureOr<int32_t> {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || !type.hasStaticShape())
      return emitError(loc) << "--auto-shard: plans static tensors only, not "
                            << value.getType();
    Tensor tensor;
    tensor.value = value;
    tensor.type = type;
    tensor.node = node;
    tensor.output = output;
    ShardingAttr sharding = getValueSharding(value);
    tensor.pinned = pinnedLayout(sharding, mesh);
    if (sharding)
      for (DimShardingAttr dim : sharding.getDims())
        tensor.pinnedOpen.push_back(dim.isOpen());
    tensorOf[value] = int32_t(tensors.size());
    tensors.push_back(tensor);
    return int32_t(tensors.size() - 1);
  };
  for (BlockArgument arg : body.getArguments()) {
    Node node;
    FailureOr<int32_t> id =
        addTensor(arg, int32_t(nodes.size()), 0, func.getLoc());
    if (failed(id))
      return failure();
    tensors[*id].parameter = isParameter(func, arg.getArgNumber());
    tensors[*id].gatheredInBuckets = tensors[*id].parameter;
    node.argTensor = *id;
    node.outputs.push_back(*id);
    node.factorAxes.resize(tensors[*id].type.getRank());
    nodes.push_back(std::move(node));
  }
  for (Operation &op : body.without_terminator()) {
    auto ruleOp = dyn_cast<ShardingRuleOpInterface>(&op);
    if (!ruleOp)
      return op.emitError() << "--auto-shard: '" << op.getName()
                            << "' has no sharding rule to plan with";
    Node node;
    node.op = &op;
    node.rule = std::make_shared<const ShardingRule>(ruleOp.getShardingRule());
    node.work = ruleOp.getWork();
    node.factorAxes.resize(node.rule->getNumFactors());
    for (auto [index, operand] : llvm::enumerate(op.getOperands())) {
      auto it = tensorOf.find(operand);
      node.inputs.push_back(it == tensorOf.end() ? -1 : it->second);
      node.readsResultWorth.push_back(ruleOp.readsResultWorth(index));
    }
    for (OpResult result : op.getResults()) {
      FailureOr<int32_t> id = addTensor(result, int32_t(nodes.size()),
                                        result.getResultNumber(), op.getLoc());
      if (failed(id))
        return failure();
      tensors[*id].constant = isa<ConstantOp>(op);
      // A parameter's working copy (its low-precision convert) is gathered
      // as the parameter is.
      tensors[*id].gatheredInBuckets =
          getCopyOf(&op) && llvm::all_of(node.inputs, [&](int32_t t) {
            return t >= 0 && tensors[t].parameter;
          });
      node.outputs.push_back(*id);
      if (!node.elementType)
        node.elementType = tensors[*id].type.getElementType();
    }
    markLinear(node);
    nodes.push_back(std::move(node));
  }
  useLists->resize(tensors.size());
  updateLists->resize(nodes.size());
  for (auto [n, node] : llvm::enumerate(nodes))
    for (auto [slot, t] : llvm::enumerate(node.inputs))
      if (t >= 0)
        (*useLists)[t].push_back({int32_t(n), unsigned(slot), {}});
  // Returned values: an update takes its argument's layout; the others are
  // returned as they are made (their pending sums added) unless the
  // function result carries a sharding.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, returned] : llvm::enumerate(ret.getOperands())) {
    int32_t t = tensorOf.lookup(returned);
    if (std::optional<unsigned> arg = getUpdatedArgument(func, i)) {
      (*useLists)[t].push_back({int32_t(*arg), ~0u, {}});
      (*updateLists)[*arg].push_back(t);
      continue;
    }
    Use use{-1, 0, {}};
    auto sharding = func.getResultAttrOfType<ShardingAttr>(
        i, ParDialect::kShardingAttrName);
    if (std::optional<ReshardLayout> pinned = pinnedLayout(sharding, mesh))
      use.fixed = *pinned;
    else
      use.asMade = true;
    (*useLists)[t].push_back(use);
  }
  // Arguments with a gradient (weights, not optimizer states).
  auto argTensor = [&](int64_t arg) -> Tensor * {
    if (arg < 0 || arg >= int64_t(func.getNumArguments()))
      return nullptr;
    return &tensors[tensorOf.lookup(func.getArgument(arg))];
  };
  func.walk([&](Operation *op) {
    auto element = [&]() -> Type {
      return op->getNumResults() ? getElementTypeOrSelf(op->getResult(0))
                                 : Type();
    };
    SmallVector<int64_t> gradientOf = getGradientOf(op);
    for (int64_t arg : gradientOf)
      if (Tensor *t = argTensor(arg)) {
        t->hasGradient = true;
        t->gradientElement = element();
      }
    if (!gradientOf.empty())
      for (Value result : op->getResults())
        if (auto it = tensorOf.find(result); it != tensorOf.end())
          tensors[it->second].gradient = true;
    if (std::optional<int64_t> arg = getCopyOf(op))
      if (Tensor *t = argTensor(*arg))
        t->workingElement = element();
  });
  if (auto bytes =
          func->getAttrOfType<IntegerAttr>(ParDialect::kBucketBytesAttrName))
    bucketBytes = bytes.getInt();
  // Activations: forward values the backward pass reads.
  for (Tensor &tensor : tensors)
    if (Operation *def = tensor.value.getDefiningOp())
      tensor.activation =
          inPhase(def, Phase::forward) &&
          llvm::any_of(tensor.value.getUsers(), [](Operation *user) {
            return inPhase(user, Phase::backward);
          });
  if (fuse)
    markFusion();
  cluster();
  return success();
}

void Planner::markLinear(Node &node) {
  // A split sum reduction leaves its results partial.
  bool partial = llvm::any_of(node.rule->getFactors(), [](const auto &f) {
    return f.kind == FactorKind::Reduction &&
           f.combiner == FactorCombiner::Sum && f.size > 1;
  });
  // A linear op carries partial sums as --par-sink-partials moves them:
  // a sum in all its operands at once; another in one operand, when its
  // result is no larger than that operand.
  auto linear = dyn_cast<LinearOpInterface>(node.op);
  if (linear && node.outputs.size() == 1 &&
      !tensors[node.outputs[0]].constant) {
    auto bytes = [&](int32_t t) {
      return bytesOf(tensors[t].type.getShape(),
                     tensors[t].type.getElementType());
    };
    int64_t resultBytes = bytes(node.outputs[0]);
    bool all = !node.inputs.empty();
    for (auto [slot, t] : llvm::enumerate(node.inputs)) {
      Linearity how = linear.getLinearity(unsigned(slot));
      all &= how == Linearity::All && t >= 0 && tensors[t].mayBePartial;
      node.linearInputs.push_back(
          t >= 0 && how != Linearity::None &&
          (how == Linearity::All || resultBytes < bytes(t)));
    }
    if (linear.getLinearity(0) == Linearity::All) {
      node.linearity = Linearity::All;
      if (!all)
        node.linearInputs.clear();
    } else {
      node.linearity = Linearity::Each;
      for (auto [slot, t] : llvm::enumerate(node.inputs))
        if (node.linearInputs[slot] && !tensors[t].mayBePartial)
          node.linearInputs[slot] = false;
    }
    if (llvm::none_of(node.linearInputs, [](bool b) { return b; })) {
      node.linearInputs.clear();
      node.linearity = Linearity::None;
    }
    partial |= !node.linearInputs.empty();
  }
  for (int32_t t : node.outputs)
    tensors[t].mayBePartial = partial;
}

void Planner::markFusion() {
  auto nodeOf = [&](Operation *op) -> Node & {
    return nodes[tensors[tensorOf.lookup(op->getResult(0))].node];
  };
  llvm::SmallPtrSet<Operation *, 16> roots;
  for (auto [g, group] :
       llvm::enumerate(fusionGroups(func.getBody().front()))) {
    roots.insert(group.root);
    for (Operation *member : group.members) {
      Node &node = nodeOf(member);
      node.group = int32_t(g);
      if (member != group.root)
        tensors[node.outputs[0]].registerIn.push_back(int32_t(g));
    }
    for (Operation *copied : group.copied)
      tensors[nodeOf(copied).outputs[0]].registerIn.push_back(int32_t(g));
  }
  for (auto [t, tensor] : llvm::enumerate(tensors))
    if (!tensor.registerIn.empty())
      tensor.materialized = llvm::any_of(uses()[t], [&](const Use &use) {
        return !use.byOp() ||
               !llvm::is_contained(tensor.registerIn, nodes[use.node].group);
      });
  // A group runs one kernel, at its root: a member whose value the group
  // also stores (what a reduction keeps) runs none of its own.
  for (Node &node : nodes)
    if (node.op)
      node.ownKernel = node.group >= 0
                           ? roots.contains(node.op)
                           : llvm::any_of(node.outputs, [&](int32_t t) {
                               return tensors[t].materialized;
                             });
}

void Planner::cluster() {
  // An op of a model layer (par.layer, set by the frontend and carried to
  // the gradients) is known by its place in its layer: the k-th op of
  // layer 5 copies the k-th op of layer 4 when both read the same places
  // of their layers (or of the layers at the same distance).
  // A pipelined step's micro-batches are copies of the first: its k-th op
  // is the k-th op of every other micro-batch, leaving out what
  // accumulates their gradients (what reads another micro-batch's value,
  // and what reads that), which the first has no counterpart of.
  llvm::DenseSet<Operation *> accumulation;
  std::map<int64_t, SmallVector<int32_t>> byMicrobatch;
  for (auto [n, node] : llvm::enumerate(nodes)) {
    if (!node.op)
      continue;
    std::optional<int64_t> microbatch = getMicrobatch(node.op);
    if (!microbatch)
      continue;
    if (llvm::any_of(node.op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          std::optional<int64_t> from =
              def ? getMicrobatch(def) : std::nullopt;
          return (from && *from != *microbatch) || accumulation.contains(def);
        })) {
      accumulation.insert(node.op);
      continue;
    }
    byMicrobatch[*microbatch].push_back(int32_t(n));
  }
  // Copies are the same op on the same types with the same attributes
  // (but the marks), reading copies of what the first reads (or the same
  // values); one pair that is not voids the micro-batch's pairing.
  auto attributes = [](Operation *op) {
    SmallVector<NamedAttribute> kept;
    for (NamedAttribute attr : op->getAttrs())
      if (!llvm::is_contained({ParDialect::kStageAttrName,
                               ParDialect::kMicrobatchAttrName,
                               ParDialect::kGradientOfAttrName},
                              attr.getName().getValue()))
        kept.push_back(attr);
    return kept;
  };
  llvm::DenseMap<int32_t, int32_t> counterpart;
  for (auto &[microbatch, copies] : byMicrobatch) {
    ArrayRef<int32_t> first = byMicrobatch[0];
    if (microbatch == 0 || copies.size() != first.size())
      continue;
    llvm::DenseMap<Operation *, Operation *> pairs;
    bool same = true;
    for (auto [mine, theirs] : llvm::zip(copies, first)) {
      Operation *a = nodes[mine].op, *b = nodes[theirs].op;
      // What tells micro-batches apart: the slice of the data each reads.
      auto sliceOfData = [](Operation *op) {
        auto slice = dyn_cast<SliceOp>(op);
        return slice && isa<BlockArgument>(slice.getInput());
      };
      same = a->getName() == b->getName() &&
             a->getResultTypes() == b->getResultTypes() &&
             a->getNumOperands() == b->getNumOperands() &&
             ((sliceOfData(a) && sliceOfData(b)) ||
              attributes(a) == attributes(b));
      for (auto [x, y] : llvm::zip(a->getOperands(), b->getOperands())) {
        if (!same)
          break;
        Operation *dx = x.getDefiningOp(), *dy = y.getDefiningOp();
        auto it = dx ? pairs.find(dx) : pairs.end();
        same = x.getType() == y.getType() &&
               (x == y || (it != pairs.end() && it->second == dy &&
                           cast<OpResult>(x).getResultNumber() ==
                               cast<OpResult>(y).getResultNumber()));
      }
      if (!same) {
        break;
      }
      pairs[a] = b;
    }
    if (!same)
      continue;
    for (auto [mine, theirs] : llvm::zip(copies, first))
      counterpart[mine] = theirs;
  }
  // Places count within a layer's ops of one micro-batch (or outside
  // them), and the stage and micro-batch marks do not tell copies apart.
  std::map<std::pair<int64_t, int64_t>, int64_t> counts;
  llvm::DenseMap<Operation *, int64_t> place;
  // (Accumulation ops count on their own.)
  for (Node &node : nodes)
    if (node.op)
      if (std::optional<int64_t> layer = getLayer(node.op))
        place[node.op] =
            counts[{*layer, accumulation.contains(node.op)
                                ? std::numeric_limits<int64_t>::min()
                                : getMicrobatch(node.op).value_or(-1)}]++;
  llvm::StringMap<int32_t> seen;
  for (auto [n, node] : llvm::enumerate(nodes)) {
    if (!node.op)
      continue;
    // A later micro-batch's op is a copy of its first micro-batch's.
    if (auto it = counterpart.find(int32_t(n));
        it != counterpart.end() && nodes[it->second].rep >= 0) {
      node.rep = nodes[it->second].rep;
      ++nodes[node.rep].copies;
      continue;
    }
    std::string signature;
    llvm::raw_string_ostream os(signature);
    std::optional<int64_t> layer = getLayer(node.op);
    if (layer)
      os << "layer op " << place[node.op] << " ";
    os << node.op->getName();
    // Marks that name a layer or an argument (which parameter a value is
    // the gradient, copy or view of) differ between copies.
    for (NamedAttribute attr : node.op->getAttrs())
      if (!isCopyMark(attr.getName().getValue()))
        os << " " << attr.getName().getValue() << "="
           << attr.getValue().getAsOpaquePointer();
    // Types are unique in the context: the pointer names one.
    for (Type type : node.op->getResultTypes())
      os << " ->" << type.getAsOpaquePointer();
    // Operands: a node's representative, or an argument read here first
    // (numbered by first appearance, so that x*x and a*b differ).
    SmallVector<int32_t> fresh;
    for (auto [slot, t] : llvm::enumerate(node.inputs)) {
      os << " |";
      if (t < 0) {
        os << node.op->getOperand(slot).getType().getAsOpaquePointer();
        continue;
      }
      Node &producer = nodes[tensors[t].node];
      if (!producer.op && producer.rep < 0) {
        auto it = llvm::find(fresh, tensors[t].node);
        os << "arg#" << (it - fresh.begin()) << " "
           << tensors[t].type.getAsOpaquePointer() << " "
           << tensors[t].parameter;
        // Its attributes but its name: a sharding or role must match.
        unsigned number = cast<BlockArgument>(tensors[t].value).getArgNumber();
        for (NamedAttribute attr : func.getArgAttrDict(number)
                                       ? func.getArgAttrDict(number).getValue()
                                       : ArrayRef<NamedAttribute>())
          if (attr.getName() != ParDialect::kNameAttrName)
            os << " " << attr.getName().getValue() << "="
               << attr.getValue().getAsOpaquePointer();
        if (it == fresh.end())
          fresh.push_back(tensors[t].node);
        continue;
      }
      std::optional<int64_t> from =
          producer.op ? getLayer(producer.op) : std::nullopt;
      if (layer && from)
        os << "layer " << (*from - *layer) << " op " << place[producer.op]
           << (getMicrobatch(producer.op) ? " of a micro-batch" : "");
      else
        os << "n" << producer.rep;
      os << "." << tensors[t].output << " "
         << tensors[t].type.getAsOpaquePointer();
    }
    auto [it, inserted] = seen.try_emplace(signature, int32_t(n));
    // Only copies share choices: ops of different layers, or ops that read
    // different values (two equal ops on the same values, or two equal
    // constants, may each want their own layout).
    if (!inserted) {
      const Node &other = nodes[it->second];
      std::optional<int64_t> otherLayer = getLayer(other.op);
      bool copy = (layer && otherLayer && *layer != *otherLayer) ||
                  getMicrobatch(node.op) != getMicrobatch(other.op);
      for (auto [mine, theirs] : llvm::zip(node.inputs, other.inputs))
        copy |= mine >= 0 && theirs >= 0 &&
                tensors[mine].node != tensors[theirs].node;
      if (!copy) {
        // This op stands for the later ones of its kind.
        it->second = int32_t(n);
        inserted = true;
      }
    }
    int32_t rep = it->second;
    node.rep = rep;
    if (!inserted)
      ++nodes[rep].copies;
    // Arguments read first here copy the arguments the representative read
    // at the same places.
    for (auto [slot, t] : llvm::enumerate(node.inputs)) {
      if (t < 0)
        continue;
      Node &producer = nodes[tensors[t].node];
      if (producer.op || producer.rep >= 0)
        continue;
      int32_t mine = tensors[nodes[rep].inputs[slot]].node;
      producer.rep = inserted ? tensors[t].node : nodes[mine].rep;
      if (!inserted)
        ++nodes[producer.rep].copies;
    }
  }
  for (auto [n, node] : llvm::enumerate(nodes))
    if (node.rep < 0)
      node.rep = int32_t(n);
}

ReshardLayout Planner::layoutOf(const Node &node, bool output, unsigned slot,
                                int32_t extra, int64_t choice) const {
  ReshardLayout layout;
  if (!node.op) {
    for (auto [d, axes] : llvm::enumerate(node.factorAxes)) {
      layout.dims.push_back(axes);
      if (int64_t(d) == choice)
        layout.dims.back().push_back(extra);
    }
    return layout;
  }
  auto axesOf = [&](int64_t factor) {
    // A link group splits alike: its leader holds the axes and the choice.
    int64_t leader = node.rule->getFactor(factor).link;
    if (leader < 0)
      leader = factor;
    Axes axes = node.factorAxes[leader];
    if (leader == choice)
      axes.push_back(extra);
    return axes;
  };
  const TensorFactors &mapping = output ? node.rule->getResultMappings()[slot]
                                        : node.rule->getOperandMappings()[slot];
  for (const DimFactors &dim : mapping) {
    layout.dims.emplace_back();
    for (int64_t factor : dim)
      llvm::append_range(layout.dims.back(), axesOf(factor));
  }
  if (output)
    for (auto [f, factor] : llvm::enumerate(node.rule->getFactors()))
      if (factor.kind == FactorKind::Reduction &&
          factor.combiner == FactorCombiner::Sum)
        llvm::append_range(layout.partial, axesOf(f));
  // Partial sums carried through the op: over its result and the operands
  // it carries them in.
  if (output || carriesInput(node, node.carry, slot))
    llvm::append_range(layout.partial, node.carried);
  if (isCarry(choice) && (output || carriesInput(node, choice, slot)))
    layout.partial.push_back(extra);
  return layout;
}

void Planner::candidates(Node &node, int32_t axis) {
  int64_t n = axisSize(axis);
  node.choices.assign(1, -1);
  if (axisUses[axis] == AxisUse::Pipeline)
    return;
  if (!node.op) {
    const Tensor &tensor = tensors[node.argTensor];
    AxisUse use = axisUses[axis];
    bool allowed =
        use == AxisUse::Free || (use == AxisUse::Data) != tensor.parameter;
    for (auto [d, size] : llvm::enumerate(tensor.type.getShape()))
      if (allowed && size % (n * shardsOf(node.factorAxes[d])) == 0)
        node.choices.push_back(d);
  } else {
    const ShardingRule &rule = *node.rule;
    auto majorFactorsUnsplittable = [&](int64_t f) {
      // A factor can split its dims only where every factor more major in
      // them has one element (else the pieces are not contiguous).
      for (ArrayRef<TensorFactors> maps :
           {rule.getOperandMappings(), rule.getResultMappings()})
        for (const TensorFactors &tensor : maps)
          for (const DimFactors &dim : tensor) {
            if (!llvm::is_contained(dim, int64_t(f)))
              continue;
            for (int64_t g : dim) {
              if (g == int64_t(f))
                break;
              if (rule.getFactor(g).size != 1)
                return true;
            }
          }
      return false;
    };
    for (auto [f, factor] : llvm::enumerate(rule.getFactors())) {
      if (factor.link >= 0 && factor.link != int64_t(f))
        continue;
      bool kindOk =
          factor.kind == FactorKind::PassThrough ||
          (factor.kind == FactorKind::Permutation && factor.link >= 0) ||
          (factor.kind == FactorKind::Reduction &&
           (factor.combiner == FactorCombiner::Sum ||
            factor.combiner == FactorCombiner::Internal));
      if (!kindOk || majorFactorsUnsplittable(f))
        continue;
      bool divides = true;
      for (int64_t member : rule.linkGroup(f))
        divides &=
            rule.getFactor(member).size % (n * shardsOf(node.factorAxes[f])) ==
            0;
      if (divides)
        node.choices.push_back(f);
    }
    // Or it runs on partial sums over the axis instead of their being
    // added first: in every operand of a sum, in one operand of an op
    // linear in each alone (the same one over every axis it carries).
    // Its result is then partial, which a user's sharding rules out.
    if (!node.linearInputs.empty() &&
        llvm::none_of(node.outputs,
                      [&](int32_t t) { return bool(tensors[t].pinned); })) {
      if (node.linearity == Linearity::All)
        node.choices.push_back(kCarryAll);
      else
        for (auto [slot, linear] : llvm::enumerate(node.linearInputs))
          if (linear && (node.carried.empty() ||
                         node.carry == kCarryOperand - int64_t(slot)))
            node.choices.push_back(kCarryOperand - int64_t(slot));
    }
  }
  // A user's sharding: the axis goes where the user put it.
  llvm::erase_if(node.choices, [&](int64_t choice) {
    for (auto [slot, t] : llvm::enumerate(node.outputs)) {
      const Tensor &tensor = tensors[t];
      if (!tensor.pinned)
        continue;
      ReshardLayout layout = layoutOf(node, true, slot, axis, choice);
      bool placed = llvm::is_contained(tensor.pinned->partial, axis);
      for (const auto &dim : tensor.pinned->dims)
        placed |= llvm::is_contained(dim, axis);
      for (auto [d, dim] : llvm::enumerate(tensor.pinned->dims)) {
        bool user = llvm::is_contained(dim, axis);
        bool plan = llvm::is_contained(layout.dims[d], axis);
        // An open dim takes an axis the user placed nowhere.
        bool open = d < tensor.pinnedOpen.size() && tensor.pinnedOpen[d];
        if (user != plan && !(plan && open && !placed))
          return true;
      }
      if (llvm::is_contained(tensor.pinned->partial, axis) !=
          llvm::is_contained(layout.partial, axis))
        return true;
    }
    return false;
  });
  // A data-parallel axis splits each data input, on the first dim it can
  // (the batch).
  if (!node.op && axisUses[axis] == AxisUse::Data && node.choices.size() > 1 &&
      !tensors[node.argTensor].parameter)
    node.choices.assign(1, node.choices[1]);
}

double Planner::nodeSeconds(const Node &node, int32_t axis,
                            int64_t choice) const {
  if (!node.op) {
    // Each step feeds every device its piece of each data input (at least
    // one pass over its bytes); parameters stay where they are.
    const Tensor &tensor = tensors[node.argTensor];
    if (tensor.parameter)
      return 0;
    double bytes = double(localBytes(machine.axisSizes(), tensor.type,
                                     layoutOf(node, true, 0, axis, choice)));
    return machine.computeSeconds({}, bytes, tensor.type.getElementType());
  }
  const ShardingRule &rule = *node.rule;
  // An op that reduces a split factor itself (a loss or softmax over a
  // split vocabulary, a norm over a split hidden dim) runs as its local
  // form, a pass over its piece for each part (ParLocalForms.cpp), not as
  // its fused kernel on a share: priced as that form (planned for a fused
  // program, as --par-fuse joins the form's parts).
  for (auto [f, factor] : llvm::enumerate(rule.getFactors()))
    if (factor.combiner == FactorCombiner::Internal &&
        (!node.factorAxes[f].empty() || int64_t(f) == choice)) {
      if (std::optional<double> seconds = localFormSeconds(node, axis, choice))
        return *seconds;
      break;
    }
  SmallVector<int64_t> shards;
  for (auto [f, axes] : llvm::enumerate(node.factorAxes)) {
    int64_t leader = rule.getFactor(f).link >= 0 ? rule.getFactor(f).link : f;
    shards.push_back(shardsOf(node.factorAxes[leader]) *
                     (leader == choice ? axisSize(axis) : 1));
  }
  OpWork work = node.work;
  work.flops *= double(rule.pointsPerDevice(shards)) /
                double(std::max<int64_t>(rule.pointsPerDevice(), 1));
  // The results first: an input read a result's worth at a time
  // (readsResultWorth) counts at most their bytes, on this layout.
  double bytes = 0, largest = 0, results = 0;
  for (auto [slot, t] : llvm::enumerate(node.outputs))
    if (t >= 0)
      results += double(localBytes(machine.axisSizes(), tensors[t].type,
                                   layoutOf(node, true, slot, axis, choice)));
  for (bool output : {true, false}) {
    ArrayRef<int32_t> slots = output ? node.outputs : node.inputs;
    for (auto [slot, t] : llvm::enumerate(slots))
      if (t >= 0) {
        double b =
            double(localBytes(machine.axisSizes(), tensors[t].type,
                              layoutOf(node, output, slot, axis, choice)));
        largest = std::max(largest, b);
        // A register of a fused group is neither written nor read back.
        const Tensor &tensor = tensors[t];
        if (output ? !tensor.materialized
                   : node.group >= 0 &&
                         llvm::is_contained(tensor.registerIn, node.group))
          continue;
        bytes +=
            !output && node.readsResultWorth[slot] ? std::min(b, results) : b;
      }
  }
  double seconds =
      machine.computeSeconds(work, bytes, node.elementType, node.ownKernel);
  // A factor the op reduces over itself: row statistics (two per row) are
  // all-reduced over its axes.
  for (auto [f, factor] : llvm::enumerate(rule.getFactors())) {
    if (factor.combiner != FactorCombiner::Internal)
      continue;
    Axes axes = node.factorAxes[f];
    if (int64_t(f) == choice)
      axes.push_back(axis);
    if (axes.empty())
      continue;
    double rows = largest / double(std::max<int64_t>(factor.size, 1)) *
                  double(shardsOf(axes));
    seconds +=
        machine.collectiveSeconds("all_reduce", axes, 2 * rows, 2 * rows);
  }
  return seconds;
}

std::optional<double> Planner::localFormSeconds(const Node &node, int32_t axis,
                                                int64_t choice) const {
  Operation *op = node.op;
  std::string key;
  llvm::raw_string_ostream os(key);
  os << op->getName() << " ";
  for (NamedAttribute attr : op->getAttrs())
    if (!attr.getName().getValue().starts_with("par."))
      os << attr.getName().getValue() << "=" << attr.getValue() << " ";
  SmallVector<ReshardLayout> inputs, outputs;
  for (auto [slot, operand] : llvm::enumerate(op->getOperands())) {
    inputs.push_back(layoutOf(node, false, unsigned(slot), axis, choice));
    os << operand.getType() << " " << layoutKey(inputs.back()) << " ";
  }
  for (auto [slot, result] : llvm::enumerate(op->getResults())) {
    outputs.push_back(layoutOf(node, true, unsigned(slot), axis, choice));
    os << "-> " << result.getType() << " " << layoutKey(outputs.back());
  }
  auto [it, inserted] = cache.localForms.try_emplace(key, std::nullopt);
  if (!inserted)
    return it->second;
  // The op alone: a function of its operands returning its results, each
  // in its layout, on a copy of the mesh.
  MLIRContext *ctx = op->getContext();
  OpBuilder b(ctx);
  Location loc = op->getLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  b.clone(*mesh.getOperation());
  auto local = func::FuncOp::create(
      b, loc, "local",
      b.getFunctionType(op->getOperandTypes(), op->getResultTypes()));
  Block *entry = local.addEntryBlock();
  b.setInsertionPointToStart(entry);
  // Each operand its own argument (an op may read one value twice, in
  // two layouts).
  Operation *copy = b.clone(*op);
  copy->setOperands(entry->getArguments());
  for (NamedAttribute attr : op->getAttrs())
    if (attr.getName().getValue().starts_with("par."))
      copy->removeAttr(attr.getName());
  func::ReturnOp::create(b, loc, copy->getResults());
  for (auto [i, layout] : llvm::enumerate(inputs))
    local.setArgAttr(unsigned(i), ParDialect::kShardingAttrName,
                     toAttr(layout));
  for (auto [i, layout] : llvm::enumerate(outputs))
    local.setResultAttr(unsigned(i), ParDialect::kShardingAttrName,
                        toAttr(layout));
  std::string error;
  FailureOr<OwningOpRef<ModuleOp>> partitioned =
      partitionedCopy(std::move(module), error, /*schedule=*/false, fuse);
  if (failed(partitioned))
    return std::nullopt;
  auto func = (**partitioned).lookupSymbol<func::FuncOp>("local");
  if (!func)
    return std::nullopt;
  StepPrediction step = predictStep(func, machine);
  it = cache.localForms.find(key);
  it->second = step.computeSeconds + step.commSeconds;
  return it->second;
}

int64_t Planner::nodeBytes(const Node &node, int32_t axis,
                           int64_t choice) const {
  int64_t bytes = 0;
  for (auto [slot, t] : llvm::enumerate(node.outputs)) {
    const Tensor &tensor = tensors[t];
    bool persistent = !node.op;
    if (!persistent && !tensor.activation)
      continue;
    int64_t b = localBytes(machine.axisSizes(), tensor.type,
                           layoutOf(node, true, slot, axis, choice));
    // A parameter has a gradient of its layout.
    bytes += tensor.hasGradient ? 2 * b : b;
  }
  return bytes;
}

double Planner::reshardSeconds(const Tensor &tensor, const ReshardLayout &from,
                               const ReshardLayout &to) {
  if (from == to || tensor.constant)
    return 0;
  // A register of a fused group that is resharded is not one: the group
  // splits in two, which writes the value and reads it back.
  return moveSeconds(tensor.type, tensor.type.getElementType(), from, to,
                     bucketOf(tensor), /*splitsGroup=*/!tensor.materialized);
}

double Planner::moveSeconds(RankedTensorType type, Type element,
                            const ReshardLayout &from, const ReshardLayout &to,
                            const std::optional<Bucket> &bucket,
                            bool splitsGroup) {
  if (from == to)
    return 0;
  std::string key;
  llvm::raw_string_ostream os(key);
  os << (splitsGroup ? "split " : "");
  if (bucket)
    os << (bucket->gathers ? "gathers" : "reductions") << " in buckets of "
       << bucket->bytes << " ";
  os << type << " as " << element << " " << layoutKey(from) << " "
     << layoutKey(to);
  auto it = cache.reshardSeconds.find(key);
  if (it != cache.reshardSeconds.end())
    return it->second;
  ReshardPlan plan;
  std::string error;
  double seconds = 0;
  if (planReshard(machine.axisSizes(), type.getShape(), from, to, plan, error))
    seconds =
        machine.reshardSeconds(reshardCost(machine.axisSizes(), type.getShape(),
                                           elementBytes(element), from, plan),
                               bucket ? &*bucket : nullptr);
  else
    seconds = kImpossible; // never chosen: the move does not exist
  if (splitsGroup)
    seconds += machine.computeSeconds(
        {},
        double(localBytes(machine.axisSizes(), type, from) +
               localBytes(machine.axisSizes(), type, to)),
        type.getElementType());
  cache.reshardSeconds[key] = seconds;
  return seconds;
}

LogicalResult Planner::solveAxis(int32_t axis, std::optional<double> cutoff) {
  IntegerProgram program;
  double fixedSeconds = 0; // costs no choice of this axis changes
  // x[n][k]: node n takes choice k; copies share their representative's.
  std::vector<SmallVector<int, 4>> x(nodes.size());
  std::vector<double> memory;
  for (auto [n, node] : llvm::enumerate(nodes)) {
    if (node.rep != int32_t(n))
      continue;
    candidates(node, axis);
    double copies = double(node.copies);
    for (int64_t choice : node.choices) {
      x[n].push_back(
          program.addColumn(copies * nodeSeconds(node, axis, choice), true));
      memory.push_back(copies * double(nodeBytes(node, axis, choice)));
    }
    SmallVector<double> ones(x[n].size(), 1.0);
    program.addRow(x[n], ones, 'E', 1);
  }
  for (auto [n, node] : llvm::enumerate(nodes))
    if (node.rep != int32_t(n)) {
      node.choices = nodes[node.rep].choices;
      x[n] = x[node.rep];
    }

  // Edges: producer output layouts against the layouts readers need, once
  // per distinct (producer, reader) pair of representatives, times the
  // number of copies.
  struct EdgeGroup {
    int32_t tensor;
    Use use;
    double copies = 0;
  };
  using EdgeKey = std::tuple<int32_t, unsigned, int32_t, unsigned, std::string>;
  llvm::MapVector<EdgeKey, EdgeGroup, std::map<EdgeKey, unsigned>> groups;
  for (auto [t, tensor] : llvm::enumerate(tensors))
    for (const Use &use : uses()[t]) {
      int32_t reader = use.node < 0 ? -1 : nodes[use.node].rep;
      auto key = std::make_tuple(
          nodes[tensor.node].rep, tensor.output, reader, use.input,
          use.asMade ? "as made" : (use.node < 0 ? layoutKey(use.fixed) : ""));
      EdgeGroup &group = groups[key];
      if (group.copies == 0) {
        group.tensor = int32_t(t);
        group.use = use;
      }
      group.copies += 1;
    }
  for (auto &[key, group] : groups) {
    const Tensor &tensor = tensors[group.tensor];
    const Use &use = group.use;
    const Node &producer = nodes[tensor.node];
    // Distinct produced layouts, each with the choices giving it.
    LayoutChoices from;
    for (auto [k, choice] : llvm::enumerate(producer.choices)) {
      ReshardLayout layout =
          layoutOf(producer, true, tensor.output, axis, choice);
      auto &entry = from[layoutKey(layout)];
      entry.first = layout;
      entry.second.push_back(x[tensor.node][k]);
    }
    if (use.asMade) {
      // Each made layout pays for adding its pending sums.
      for (auto &[fk, fv] : from) {
        double cost =
            group.copies *
            reshardSeconds(tensor, fv.first, neededLayout(use, fv.first));
        if (fv.second.empty())
          fixedSeconds += cost;
        for (int col : fv.second)
          program.cost(col) += cost;
      }
      continue;
    }
    LayoutChoices to;
    if (use.node < 0) {
      // A fixed layout as far as the axes placed so far and this one go:
      // the axes still to come are priced when they are placed.
      ReshardLayout fixed = use.fixed;
      auto later = [&](int32_t a) {
        return a != axis && !llvm::is_contained(placed, a);
      };
      for (auto &dim : fixed.dims)
        llvm::erase_if(dim, later);
      llvm::erase_if(fixed.partial, later);
      to[layoutKey(fixed)].first = fixed;
    } else {
      const Node &reader = nodes[use.node];
      bool update = use.input == ~0u; // an update: its argument's layout
      for (auto [k, choice] : llvm::enumerate(reader.choices)) {
        ReshardLayout layout =
            update ? layoutOf(reader, true, 0, axis, choice)
                   : layoutOf(reader, false, use.input, axis, choice);
        auto &entry = to[layoutKey(layout)];
        entry.first = layout;
        entry.second.push_back(x[use.node][k]);
      }
    }
    // A pair the reader cannot read (a carried operand not made as it
    // is) is ruled out, not priced: the relaxation stays as tight as
    // without carry choices (priced at kImpossible, CBC branched on a
    // pipelined GPT-175B's program 2.4x as long).
    auto excluded = [&](const ReshardLayout &a, const ReshardLayout &b) {
      return use.byOp() && !readable(tensor, a, b);
    };
    // One side with one layout: the cost lands on the other side's
    // choices (or is fixed when neither side chooses).
    if (from.size() == 1 || to.size() == 1) {
      for (auto &[fk, fv] : from)
        for (auto &[tk, tv] : to) {
          ArrayRef<int> cols = from.size() == 1 ? tv.second : fv.second;
          if (excluded(fv.first, tv.first) && !cols.empty()) {
            for (int col : cols)
              program.forbid(col);
            continue;
          }
          double cost =
              group.copies * (use.byOp()
                                  ? operandSeconds(tensor, fv.first, tv.first)
                                  : reshardSeconds(tensor, fv.first, tv.first));
          if (cols.empty())
            fixedSeconds += cost;
          for (int col : cols)
            program.cost(col) += cost;
        }
      continue;
    }
    // e[i][j] for each pair; rows tie them to both sides' choices.
    std::vector<SmallVector<int>> rowsFrom(from.size()), rowsTo(to.size());
    for (auto [i, f] : llvm::enumerate(from))
      for (auto [j, g] : llvm::enumerate(to)) {
        if (excluded(f.second.first, g.second.first))
          continue;
        int e = program.addColumn(group.copies * reshardSeconds(tensor,
                                                                f.second.first,
                                                                g.second.first),
                                  false);
        memory.push_back(0);
        rowsFrom[i].push_back(e);
        rowsTo[j].push_back(e);
      }
    auto tie = [&](SmallVector<int> pairs, ArrayRef<int> choices) {
      SmallVector<double> coefs(pairs.size(), 1.0);
      for (int col : choices) {
        pairs.push_back(col);
        coefs.push_back(-1.0);
      }
      program.addRow(pairs, coefs, 'E', 0);
    };
    for (auto [i, f] : llvm::enumerate(from))
      tie(rowsFrom[i], f.second.second);
    for (auto [j, g] : llvm::enumerate(to))
      tie(rowsTo[j], g.second.second);
  }
  if (memoryLimit > 0) {
    // A plan fits only if every node's smallest choice together does (the
    // edges price pairs of choices, and rule out only the pairs a carried
    // operand cannot be read in, so this is a lower bound): when they do
    // not, say so without the solver, which can take long to prove it.
    double least = 0;
    for (auto [n, node] : llvm::enumerate(nodes)) {
      if (node.rep != int32_t(n) || x[n].empty())
        continue;
      double smallest = std::numeric_limits<double>::infinity();
      for (int col : x[n])
        smallest = std::min(smallest, memory[size_t(col)]);
      least += smallest;
    }
    if (least > double(memoryLimit))
      return failure();
    SmallVector<int> cols;
    SmallVector<double> coefs;
    for (auto [col, bytes] : llvm::enumerate(memory))
      if (bytes != 0) {
        cols.push_back(int(col));
        coefs.push_back(bytes);
      }
    program.relaxableRow = program.numRows();
    program.addRow(cols, coefs, 'L', double(memoryLimit));
  }
  std::optional<double> bound;
  program.branchNodes = branchNodes;
  auto result = program.solve(
      cache.programs,
      cutoff ? std::optional<double>(*cutoff - fixedSeconds) : std::nullopt,
      &bound);
  if (!result) {
    if (bound)
      prunedAt = *bound + fixedSeconds;
    return failure();
  }
  const std::vector<double> &solution = result->first;
  predictedSeconds = result->second + fixedSeconds;
  for (auto [n, node] : llvm::enumerate(nodes)) {
    node.chosen = -1;
    for (auto [k, choice] : llvm::enumerate(node.choices))
      if (solution[x[n][k]] > 0.5)
        node.chosen = choice;
    if (node.chosen >= 0)
      node.factorAxes[node.chosen].push_back(axis);
    if (isCarry(node.chosen)) {
      node.carried.push_back(axis);
      node.carry = node.chosen;
    }
  }
  placed.push_back(axis);
  return success();
}

LogicalResult Planner::solve() {
  SmallVector<int32_t> order;
  for (auto [a, size] : llvm::enumerate(machine.axisSizes()))
    if (size > 1)
      order.push_back(int32_t(a));
  llvm::stable_sort(
      order, [&](int32_t a, int32_t b) { return axisSize(a) > axisSize(b); });
  // The program of the last axis that can split prices the whole plan (an
  // earlier one's, only the axes placed so far; a pipeline axis splits
  // nothing and adds nothing): only it can prune.
  auto splits = [&](int32_t a) { return axisUses[a] != AxisUse::Pipeline; };
  auto lastSplit = llvm::find_if(llvm::reverse(order), splits);
  for (int32_t axis : order) {
    std::optional<double> cutoff =
        lastSplit != llvm::reverse(order).end() && axis == *lastSplit
            ? pruneAbove
            : std::nullopt;
    if (succeeded(solveAxis(axis, cutoff)))
      continue;
    if (prunedAt)
      return failure();
    // Nothing fits the memory row: place the axis for time alone; the
    // exact memory plan then decides (ZeRO, or an error that says how much
    // any plan needs).
    int64_t limit = memoryLimit;
    memoryLimit = 0;
    LogicalResult result = solveAxis(axis);
    memoryLimit = limit;
    if (failed(result))
      return func.emitError()
             << "--auto-shard: the integer program for mesh "
                "axis '"
             << mesh.getAxisNames()[axis] << "' has no solution";
  }
  predictedSeconds += partlyFilledBucketSeconds();
  return success();
}

double Planner::partlyFilledBucketSeconds() const {
  if (bucketBytes <= 0)
    return 0;
  // Bytes per device of the bucketed collectives of one kind on one group.
  std::map<std::pair<ReshardStepKind, SmallVector<int32_t, 2>>, double> filled;
  for (auto [t, tensor] : llvm::enumerate(tensors)) {
    std::optional<Bucket> bucket = bucketOf(tensor);
    if (!bucket || tensor.constant)
      continue;
    ReshardLayout produced =
        layoutOf(nodes[tensor.node], true, tensor.output, -1, -1);
    for (const Use &use : uses()[t]) {
      ReshardLayout needed = neededLayout(use, produced);
      ReshardPlan plan;
      std::string error;
      if (needed == produced ||
          !planReshard(machine.axisSizes(), tensor.type.getShape(), produced,
                       needed, plan, error))
        continue;
      ReshardCost cost = reshardCost(
          machine.axisSizes(), tensor.type.getShape(),
          elementBytes(tensor.type.getElementType()), produced, plan);
      for (const ReshardCost::Step &step : cost.steps)
        if (bucket->carries(step.kind) && step.bufferBytes < bucketBytes)
          filled[{step.kind, step.axes}] += double(step.bufferBytes);
    }
  }
  double seconds = 0;
  for (const auto &[group, bytes] : filled)
    if (bytes < double(bucketBytes))
      seconds += machine.collectiveSeconds(stringifyReshardStep(group.first),
                                           group.second, 0, 0,
                                           1 - bytes / double(bucketBytes));
  return seconds;
}

ShardingAttr Planner::toAttr(const ReshardLayout &layout) const {
  MLIRContext *ctx = func.getContext();
  auto names = [&](ArrayRef<int32_t> axes) {
    SmallVector<StringAttr> result;
    for (int32_t axis : axes)
      result.push_back(cast<StringAttr>(mesh.getAxisNames()[axis]));
    return result;
  };
  SmallVector<DimShardingAttr> dims;
  for (const auto &dim : layout.dims)
    dims.push_back(
        DimShardingAttr::get(ctx, names(dim), /*isClosed=*/true, std::nullopt));
  return ShardingAttr::get(ctx, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                           dims, {}, names(layout.partial));
}

/// `layout` with its pending sums added (no partial axes).
static ReshardLayout summed(ReshardLayout layout) {
  layout.partial.clear();
  return layout;
}

ReshardLayout Planner::neededLayout(const Use &use,
                                    const ReshardLayout &produced) const {
  if (use.asMade)
    return summed(produced);
  if (use.node < 0)
    return use.fixed;
  const Node &reader = nodes[use.node];
  if (use.input == ~0u) // an update: its argument's layout
    return layoutOf(reader, true, 0, -1, -1);
  return layoutOf(reader, false, use.input, -1, -1);
}

double Planner::localSeconds(const Node &node, int32_t n, int32_t axis,
                             int64_t choice) {
  double seconds = nodeSeconds(node, axis, choice);
  for (auto [slot, t] : llvm::enumerate(node.inputs))
    if (t >= 0)
      seconds += operandSeconds(
          tensors[t],
          layoutOf(nodes[tensors[t].node], true, tensors[t].output, -1, -1),
          layoutOf(node, false, slot, axis, choice));
  for (auto [slot, t] : llvm::enumerate(node.outputs)) {
    ReshardLayout produced = layoutOf(node, true, slot, axis, choice);
    for (const Use &use : uses()[t]) {
      ReshardLayout needed = neededLayout(use, produced);
      seconds += use.byOp() ? operandSeconds(tensors[t], produced, needed)
                            : reshardSeconds(tensors[t], produced, needed);
    }
  }
  // An argument's updates arrive in its layout.
  for (int32_t t : updates()[n])
    seconds += reshardSeconds(
        tensors[t],
        layoutOf(nodes[tensors[t].node], true, tensors[t].output, -1, -1),
        layoutOf(node, true, 0, axis, choice));
  return seconds;
}

std::vector<Planner::Move> Planner::bestMoves() {
  std::vector<Move> moves(nodes.size());
  for (auto [n, node] : llvm::enumerate(nodes)) {
    if (node.rep != int32_t(n))
      continue;
    Move &best = moves[n];
    for (int32_t axis : placed) {
      int64_t from = -1;
      for (auto [f, axes] : llvm::enumerate(node.factorAxes))
        if (llvm::is_contained(axes, axis))
          from = int64_t(f);
      if (llvm::is_contained(node.carried, axis))
        from = node.carry;
      // As planned (the axes in their order), then with the axis taken
      // out and put on each other candidate in turn.
      double base = localSeconds(node, int32_t(n), axis, -1);
      int64_t baseBytes = nodeBytes(node, axis, -1);
      SmallVector<Axes> kept = node.factorAxes;
      Axes keptCarried = node.carried;
      dropAxis(node, from, axis);
      candidates(node, axis);
      for (int64_t choice : node.choices) {
        if (choice == from)
          continue;
        double seconds =
            localSeconds(node, int32_t(n), axis, choice) - base;
        if (best.axis < 0 || seconds < best.seconds)
          best = {axis, from, choice, seconds,
                  nodeBytes(node, axis, choice) - baseBytes};
      }
      node.factorAxes = std::move(kept);
      node.carried = std::move(keptCarried);
    }
  }
  for (auto [n, node] : llvm::enumerate(nodes))
    moves[n] = moves[node.rep];
  return moves;
}

void Planner::writeBack() {
  auto finalLayout = [&](const Tensor &tensor) {
    return layoutOf(nodes[tensor.node], true, tensor.output, -1, -1);
  };
  // A value carried partial is written with those sums added, and so are
  // the operands it carries them in (as any operand): --par-sink-partials
  // then moves the additions after the op, which leaves it partial as
  // planned.
  auto writtenLayout = [&](const Tensor &tensor) {
    ReshardLayout layout = finalLayout(tensor);
    llvm::erase_if(layout.partial, [&](int32_t axis) {
      return llvm::is_contained(nodes[tensor.node].carried, axis);
    });
    return layout;
  };
  MLIRContext *ctx = func.getContext();
  SignatureAttrs signature(func);
  for (const Tensor &tensor : tensors) {
    if (auto arg = dyn_cast<BlockArgument>(tensor.value))
      signature.setArgSharding(arg.getArgNumber(), toAttr(finalLayout(tensor)));
    else
      setValueSharding(tensor.value, toAttr(writtenLayout(tensor)));
  }
  DictionaryAttr readerNeeds = DictionaryAttr::get(
      ctx, {NamedAttribute(StringAttr::get(ctx, "reader"), UnitAttr::get(ctx))});
  OpBuilder b(ctx);

  for (auto [t, tensor] : llvm::enumerate(tensors)) {
    ReshardLayout produced = finalLayout(tensor);
    // A constant read in no layout of its own (any layout is free to it,
    // so the plan may leave it any) is built in its first reader's: a
    // copy for each reader would leave the original unread.
    if (tensor.constant && !uses()[t].empty() &&
        llvm::none_of(uses()[t], [&](const Use &use) {
          return !use.byOp() || neededLayout(use, produced) == produced;
        })) {
      produced = neededLayout(uses()[t].front(), produced);
      setValueSharding(tensor.value, toAttr(produced));
    }
    for (const Use &use : uses()[t]) {
      if (!use.byOp())
        continue;
      Node &reader = nodes[use.node];
      ReshardLayout needed = neededLayout(use, produced);
      if (needed == produced || (!nodes[tensor.node].carried.empty() &&
                                 needed == writtenLayout(tensor)))
        continue;
      b.setInsertionPoint(reader.op);
      Value moved;
      if (tensor.constant) {
        // Each device builds its own piece of a constant: a copy in the
        // layout this reader needs costs nothing.
        Operation *copy = b.clone(*tensor.value.getDefiningOp());
        moved = copy->getResult(0);
      } else {
        moved = ShardingConstraintOp::create(
            b, reader.op->getLoc(), tensor.type, tensor.value, toAttr(needed));
        // Issued for its reader: in its phase, layer and pipeline stage.
        StepMarks::of(reader.op).stamp(moved.getDefiningOp());
        // A recomputed reader's data movement is issued with it.
        if (isLate(reader.op))
          setLate(moved.getDefiningOp());
      }
      setValueSharding(moved, toAttr(needed));
      moved.getDefiningOp()->setAttr(ParDialect::kPlannedAttrName,
                                     ArrayAttr::get(ctx, {readerNeeds}));
      reader.op->setOperand(use.input, moved);
    }
  }
  // Function results: an update in its argument's layout, the others as
  // they are made (their sums added) unless the user gave them a sharding.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, returned] : llvm::enumerate(ret.getOperands())) {
    ReshardLayout layout;
    if (std::optional<unsigned> arg = getUpdatedArgument(func, i))
      layout = finalLayout(tensors[nodes[*arg].argTensor]);
    else if (signature.result(i).get(ParDialect::kShardingAttrName))
      continue;
    else
      layout = summed(finalLayout(tensors[tensorOf.lookup(returned)]));
    signature.setResultSharding(i, toAttr(layout));
  }
  signature.write();
}

void Planner::writeRecords() {
  // What each value's layout beat: the best move at its producer.
  MLIRContext *ctx = func.getContext();
  std::vector<Move> moves = bestMoves();
  auto record = [&](const Tensor &tensor) -> DictionaryAttr {
    Node &node = nodes[tensor.node];
    const Move &move = moves[tensor.node];
    Builder b(ctx);
    SmallVector<NamedAttribute> entries;
    // The axes a user placed are theirs (the plan only keeps them).
    if (tensor.pinned)
      entries.push_back(b.getNamedAttr("annotated", toAttr(*tensor.pinned)));
    if (move.axis < 0)
      return b.getDictionaryAttr(entries);
    SmallVector<Axes> kept = node.factorAxes;
    Axes keptCarried = node.carried;
    dropAxis(node, move.from, move.axis);
    ReshardLayout other =
        layoutOf(node, true, tensor.output, move.axis, move.to);
    node.factorAxes = std::move(kept);
    node.carried = std::move(keptCarried);
    entries.push_back(b.getNamedAttr("beat", toAttr(other)));
    entries.push_back(b.getNamedAttr("by", b.getF64FloatAttr(move.seconds)));
    if (move.bytes != 0)
      entries.push_back(
          b.getNamedAttr("bytes", b.getI64IntegerAttr(move.bytes)));
    return b.getDictionaryAttr(entries);
  };
  SignatureAttrs signature(func);
  llvm::DenseMap<Operation *, SmallVector<Attribute>> records;
  for (const Tensor &tensor : tensors) {
    if (auto arg = dyn_cast<BlockArgument>(tensor.value)) {
      signature.arg(arg.getArgNumber())
          .set(ParDialect::kPlannedAttrName, record(tensor));
      continue;
    }
    Operation *op = tensor.value.getDefiningOp();
    SmallVector<Attribute> &entries = records[op];
    entries.resize(op->getNumResults(), DictionaryAttr::get(ctx));
    entries[tensor.output] = record(tensor);
  }
  for (auto &[op, entries] : records)
    op->setAttr(ParDialect::kPlannedAttrName, ArrayAttr::get(ctx, entries));
  signature.write();
}

SmallVector<std::string> Planner::axisRoles() const {
  SmallVector<std::string> roles(machine.axisSizes().size());
  for (auto [a, role] : llvm::enumerate(roles)) {
    // What the axis splits among the arguments: data inputs, weights (read
    // outside the optimizer phase), or only optimizer states (as ZeRO).
    bool data = false, weights = false, states = false;
    for (const Node &node : nodes) {
      if (node.op)
        continue;
      const Tensor &arg = tensors[node.argTensor];
      bool used = llvm::any_of(node.factorAxes, [&](const Axes &axes) {
        return llvm::is_contained(axes, int32_t(a));
      });
      if (!used)
        continue;
      if (!arg.parameter)
        data = true;
      else if (llvm::any_of(arg.value.getUsers(), [](Operation *user) {
                 return !inPhase(user, Phase::optimizer);
               }))
        weights = true;
      else
        states = true;
    }
    SmallVector<StringRef> parts;
    if (data)
      parts.push_back("data");
    if (weights)
      parts.push_back("tensor");
    if (states)
      parts.push_back("optimizer states");
    role = axisSize(a) == 1                     ? "unused"
           : axisUses[a] == AxisUse::Pipeline ? "pipeline"
           : parts.empty()                    ? "replicated"
                                              : llvm::join(parts, "+");
  }
  return roles;
}

Footprint Planner::footprint(std::optional<int32_t> dataAxis) {
  Footprint f;
  if (dataAxis)
    f.dataSize = axisSize(*dataAxis);
  // A pipelined step: each op on the device of its stage, each argument on
  // the devices of its readers; a micro-batch's activations are held at
  // once on device d by 1F1B for min(m, p - d) of the m micro-batches
  // (GPipe holds all m; the checks try each schedule).
  std::optional<PipelineInfo> pipeline = getPipeline(func);
  int64_t p = pipeline ? pipeline->stages : 1;
  int64_t m = pipeline ? std::max<int64_t>(pipeline->microbatches, 1) : 1;
  f.devices.assign(std::max<int64_t>(p, 1), Footprint::Device());
  auto devicesOf = [&](Operation *op, SmallVectorImpl<int64_t> &out) {
    std::optional<int64_t> stage = op ? getStage(op) : std::nullopt;
    if (p > 1 && stage)
      out.push_back(pipeline->deviceOf(*stage));
    else
      for (int64_t d = 0; d < p; ++d)
        out.push_back(d);
  };
  llvm::SmallDenseSet<int32_t> updaters;
  for (auto [n, node] : llvm::enumerate(nodes))
    for (auto [slot, t] : llvm::enumerate(node.outputs)) {
      const Tensor &tensor = tensors[t];
      ReshardLayout layout = layoutOf(node, true, slot, -1, -1);
      int64_t b = localBytes(machine.axisSizes(), tensor.type, layout);
      SmallVector<int64_t, 4> on;
      if (node.op) {
        if (!tensor.activation)
          continue;
        devicesOf(node.op, on);
        bool perMicrobatch = p > 1 && getMicrobatch(node.op).has_value();
        for (int64_t d : on)
          f.devices[d].other += perMicrobatch ? b * std::min(m, p - d) / m : b;
        continue;
      }
      if (p > 1) {
        for (const Use &use : uses()[t])
          if (use.node >= 0 && nodes[use.node].op)
            devicesOf(nodes[use.node].op, on);
        llvm::sort(on);
        on.erase(std::unique(on.begin(), on.end()), on.end());
      }
      if (on.empty())
        devicesOf(nullptr, on);
      bool split = dataAxis && llvm::any_of(layout.dims, [&](const Axes &d) {
                     return llvm::is_contained(d, *dataAxis);
                   });
      int64_t zeroable = split ? 0 : b;
      for (int64_t d : on) {
        Footprint::Device &device = f.devices[d];
        if (!tensor.parameter) {
          device.other += b; // a data input
        } else if (tensor.hasGradient) {
          device.weights += b;
          device.gradients += b;
          device.zeroWeights += zeroable;
          device.zeroGradients += zeroable;
        } else {
          device.states += b;
          device.zeroStates += zeroable;
        }
      }
      if (!tensor.parameter || !zeroable || !dataAxis)
        continue;
      // What ZeRO changes, priced by the moves the partitioner will make
      // (planReshard), each in the step's buckets where it has them: a
      // gradient in its element type, a gather in the working copy's.
      auto move = [&](const ReshardLayout &from, const ReshardLayout &to,
                      bool gathers, Type element) {
        return moveSeconds(tensor.type,
                           element ? element : tensor.type.getElementType(),
                           from, to, bucketFor(tensor, gathers));
      };
      // The op that writes the argument's update, the layout it writes
      // in, and whether that is already a shard over the data axis.
      int32_t writer = -1;
      const Tensor *written = nullptr;
      ReshardLayout writtenLayout;
      for (int32_t update : updates()[n])
        if (int32_t w = tensors[update].node; w >= 0 && nodes[w].op) {
          writer = w;
          written = &tensors[update];
          writtenLayout =
              layoutOf(nodes[w], true, tensors[update].output, -1, -1);
        }
      bool shardUpdated =
          written && llvm::any_of(writtenLayout.dims, [&](const Axes &d) {
            return llvm::is_contained(d, *dataAxis);
          });
      // The argument's layout under ZeRO (as --par-zero makes it): the
      // update's where that is the argument's plus the data axis, else the
      // data axis on the dim zeroShardDim picks from the per-device shape
      // (none: ZeRO leaves the argument as it is).
      ReshardLayout sharded = layout;
      ReshardLayout without = writtenLayout;
      for (Axes &d : without.dims)
        llvm::erase(d, *dataAxis);
      if (shardUpdated && writtenLayout.partial.empty() &&
          without.dims == layout.dims) {
        sharded = writtenLayout;
      } else {
        SmallVector<int64_t> local;
        for (auto [d, size] : llvm::enumerate(tensor.type.getShape()))
          local.push_back(size / shardsOf(layout.dims[d]));
        int64_t dim = zeroShardDim(local, f.dataSize);
        if (dim < 0)
          continue;
        sharded.dims[dim].push_back(*dataAxis);
      }
      // --par-zero lays the update out as the argument's shard (the
      // gradient reduce-scattered into it): the plan's move of the update
      // back to the whole argument is gone.
      if (written)
        f.shardSeconds -= reshardSeconds(*written, writtenLayout, layout);
      if (tensor.hasGradient) {
        if (!shardUpdated) {
          // The gradient (partial over the data axis) to the shard instead
          // of the whole.
          ReshardLayout partial = layout;
          partial.partial.push_back(*dataAxis);
          f.shardSeconds +=
              move(partial, sharded, false, tensor.gradientElement) -
              move(partial, layout, false, tensor.gradientElement);
        }
        double gather = move(sharded, layout, true, tensor.workingElement);
        f.updateGatherSeconds += gather;
        f.gatherSeconds += 2 * gather;
      }
      // The update's work on a shard (once per op: AdamW writes three).
      if (writer >= 0 && !shardUpdated && updaters.insert(writer).second)
        f.shardSeconds -=
            nodeSeconds(nodes[writer], -1, -1) * (1 - 1 / double(f.dataSize));
    }
  return f;
}

/// What the partitioned plan of `module` needs: the largest arena of any
/// function and the slowest predicted call.
struct Exact {
  int64_t arenaBytes = 0;
  double stepSeconds = 0;
  StepPrediction step;
  /// Each function as --par-remat=auto measures it (a recomputation trial
  /// starts from these instead of partitioning the plan again).
  std::map<std::string, RematMeasurement> measured;
  /// The partitioned program's structure (programHash): plans that differ
  /// only in a choice the partitioner makes moot (ZeRO-3 where every
  /// parameter is already split over the data axis) compare equal.
  llvm::hash_code program = 0;
  /// Where the figures were read off two shortened copies of the step
  /// (its first layers and its last, 3 and 4 layers in all; of a pipelined
  /// step, one and two layers of each virtual stage) and the second one's
  /// difference from the first counted once per layer left out: the step's
  /// layer count (0: the whole module was checked). Such figures have no
  /// `measured`.
  int64_t shortenedLayers = 0;
  /// Of a pipelined step: each stage function's arena and call (without
  /// the bubble), by stage, and the slot times the bubble is simulated
  /// with under `pipeline`.
  struct Stage {
    int64_t arenaBytes = 0;
    StepPrediction step;
  };
  SmallVector<Stage> stages;
  SlotTimes work;
  std::optional<PipelineInfo> pipeline;
};

/// `b` grown by `times` its difference from `a`, field by field; MFU, a
/// ratio, is `b`'s scaled by the model FLOPs and the step time it grew by.
static StepPrediction grownStep(const StepPrediction &a,
                                const StepPrediction &b, double times) {
  auto grow = [&](auto x, auto y) { return decltype(y)(y + (y - x) * times); };
  StepPrediction step;
  step.computeSeconds = grow(a.computeSeconds, b.computeSeconds);
  step.commSeconds = grow(a.commSeconds, b.commSeconds);
  step.exposedCommSeconds = grow(a.exposedCommSeconds, b.exposedCommSeconds);
  step.stepSeconds = grow(a.stepSeconds, b.stepSeconds);
  step.deviceFlops = grow(a.deviceFlops, b.deviceFlops);
  step.modelFlops = grow(a.modelFlops, b.modelFlops);
  step.collectives =
      int64_t(std::llround(grow(double(a.collectives), double(b.collectives))));
  step.sentBytes =
      int64_t(std::llround(grow(double(a.sentBytes), double(b.sentBytes))));
  if (b.modelFlops > 0 && step.stepSeconds > 0)
    step.mfu = b.mfu * (step.modelFlops / b.modelFlops) *
               (b.stepSeconds / step.stepSeconds);
  return step;
}

/// The figures of a step of `layers` layers from those of its copies with
/// 3 (`three`) and 4 (`four`) layers: what the fourth layer added, once
/// more per layer left out.
static Exact extrapolate(const Exact &three, const Exact &four,
                         int64_t layers) {
  int64_t extra = layers - 4;
  auto grow = [&](auto a, auto b) { return b + (b - a) * extra; };
  Exact exact;
  exact.shortenedLayers = layers;
  exact.program = llvm::hash_combine(four.program, layers);
  exact.arenaBytes = grow(three.arenaBytes, four.arenaBytes);
  exact.stepSeconds = grow(three.stepSeconds, four.stepSeconds);
  exact.step = grownStep(three.step, four.step, double(extra));
  return exact;
}

/// The figures of a pipelined step whose virtual stages have `whole`
/// layers from those of two copies with `fewer` and `more` layers in each
/// stage (`more` one more where a stage has it): each stage function's
/// arena and call, and each virtual stage's slot times, grow by what its
/// layers added, once more per layer left out; the bubble is simulated
/// again with the grown slot times. Fails where the copies' stages do not
/// pair up.
static FailureOr<Exact> extrapolateStages(const Exact &a, const Exact &b,
                                          ArrayRef<int64_t> fewer,
                                          ArrayRef<int64_t> more,
                                          ArrayRef<int64_t> whole) {
  if (!a.pipeline || !b.pipeline || a.stages.size() != b.stages.size() ||
      b.stages.empty() || fewer.size() != whole.size() ||
      more.size() != whole.size() ||
      int64_t(whole.size()) != b.pipeline->chunks() ||
      int64_t(a.work.forward.size()) != b.pipeline->chunks() ||
      int64_t(b.work.forward.size()) != b.pipeline->chunks())
    return failure();
  const PipelineInfo &info = *b.pipeline;
  // How many times its difference from `fewer` to `more` a count of
  // `whole` layers adds to `more`'s: none where they have the same.
  auto times = [](int64_t x, int64_t y, int64_t z) -> std::optional<double> {
    if (y == x)
      return z == y ? std::optional<double>(0.0) : std::nullopt;
    return double(z - y) / double(y - x);
  };
  Exact exact;
  exact.pipeline = info;
  exact.work = SlotTimes(info.chunks());
  int64_t layers = 0;
  for (int64_t c = 0; c < info.chunks(); ++c) {
    std::optional<double> t = times(fewer[c], more[c], whole[c]);
    if (!t)
      return failure();
    auto grow = [&](double x, double y) { return y + (y - x) * *t; };
    exact.work.forward[c] = grow(a.work.forward[c], b.work.forward[c]);
    exact.work.backward[c] = grow(a.work.backward[c], b.work.backward[c]);
    exact.work.weight[c] = grow(a.work.weight[c], b.work.weight[c]);
    layers += whole[c];
  }
  double bubble = simulateSchedule(info, exact.work).bubble;
  for (auto [d, pair] : llvm::enumerate(llvm::zip_equal(a.stages, b.stages))) {
    auto [x, y] = pair;
    int64_t nx = 0, ny = 0, nz = 0;
    for (int64_t c = 0; c < info.chunks(); ++c)
      if (info.deviceOf(c) == int64_t(d)) {
        nx += fewer[c];
        ny += more[c];
        nz += whole[c];
      }
    std::optional<double> t = times(nx, ny, nz);
    if (!t)
      return failure();
    Exact::Stage stage;
    stage.arenaBytes = int64_t(std::llround(
        double(y.arenaBytes) + double(y.arenaBytes - x.arenaBytes) * *t));
    stage.step = grownStep(x.step, y.step, *t);
    exact.stages.push_back(stage);
    exact.arenaBytes = std::max(exact.arenaBytes, stage.arenaBytes);
    double seconds = stage.step.stepSeconds * (1 + bubble);
    if (seconds >= exact.stepSeconds) {
      exact.stepSeconds = seconds;
      exact.step = stage.step;
      exact.step.stepSeconds = seconds;
    }
  }
  exact.shortenedLayers = layers;
  exact.program = llvm::hash_combine(b.program, layers);
  return exact;
}

/// A hash of `module`'s structure: each op's name, attributes and result
/// types, and its operands as the positions of the values they read, in
/// order; of a function, its signature and argument and result attributes
/// but not its marks (par.zero and the like record how the program was
/// made). Two modules with the same hash are the same program (up to a
/// 64-bit collision).
static llvm::hash_code programHash(ModuleOp module) {
  DenseMap<Value, uint64_t> ids;
  llvm::hash_code hash = 0;
  module->walk<WalkOrder::PreOrder>([&](Operation *op) {
    Attribute attrs = isa<FunctionOpInterface>(op)
                          ? op->getPropertiesAsAttribute()
                          : Attribute(op->getAttrDictionary());
    hash = llvm::hash_combine(hash, op->getName().getAsOpaquePointer(),
                              attrs.getAsOpaquePointer(), op->getNumRegions(),
                              op->getNumOperands());
    for (Value operand : op->getOperands())
      hash = llvm::hash_combine(hash, ids.lookup(operand));
    for (Value result : op->getResults()) {
      ids[result] = ids.size() + 1;
      hash = llvm::hash_combine(hash, result.getType().getAsOpaquePointer());
    }
    for (Region &region : op->getRegions())
      for (Block &block : region) {
        hash = llvm::hash_combine(hash, block.getNumArguments());
        for (BlockArgument arg : block.getArguments()) {
          ids[arg] = ids.size() + 1;
          hash = llvm::hash_combine(hash, arg.getType().getAsOpaquePointer());
        }
      }
  });
  return hash;
}

/// The checked figures of `partitioned` (a plan partitioned and
/// scheduled by partitionedCopy).
FailureOr<Exact> evaluatePartitioned(ModuleOp partitioned,
                                     const MachineModel &machine) {
  Exact exact;
  exact.program = programHash(partitioned);
  // The slot times of each pipelined step (of all its stage functions).
  DenseMap<Operation *, SlotTimes> stepWork;
  Operation *firstPipelined = nullptr;
  for (auto func : partitioned.getOps<func::FuncOp>()) {
    if (func.isDeclaration())
      continue;
    FailureOr<MemoryPlan> plan = planMemory(func, 64);
    if (failed(plan))
      return failure();
    exact.arenaBytes = std::max(exact.arenaBytes, plan->arenaBytes);
    exact.measured[func.getSymName().str()] = measureRemat(*plan);
    StepPrediction step = predictStep(func, machine);
    // A pipeline stage's call is one stage's work; the step waits for the
    // slowest stage and the bubble the schedule leaves (simulated with the
    // stages' FLOPs), so the stage's time counts (1 + bubble) times.
    if (auto of = func->getAttrOfType<StringAttr>(
            ParDialect::kStageOfAttrName))
      if (std::optional<PipelineInfo> info = getPipeline(func))
        if (auto stepFunc = partitioned.lookupSymbol<func::FuncOp>(of)) {
          auto [it, inserted] = stepWork.try_emplace(stepFunc);
          if (inserted)
            it->second = stageWork(partitioned, stepFunc, *info);
          const SlotTimes &work = it->second;
          // The stages of the (first) pipelined step, for extrapolation.
          if (!firstPipelined && info->stages >= 1) {
            firstPipelined = stepFunc;
            exact.pipeline = info;
            exact.work = work;
            exact.stages.resize(info->stages);
          }
          auto index =
              func->getAttrOfType<IntegerAttr>(ParDialect::kStageAttrName);
          if (firstPipelined == stepFunc.getOperation() && index &&
              index.getInt() >= 0 && index.getInt() < info->stages)
            exact.stages[index.getInt()] = {plan->arenaBytes, step};
          step.stepSeconds *= 1 + simulateSchedule(*info, work).bubble;
        }
    if (step.stepSeconds >= exact.stepSeconds) {
      exact.stepSeconds = step.stepSeconds;
      exact.step = step;
    }
  }
  return exact;
}

FailureOr<Exact> evaluate(ModuleOp module, const MachineModel &machine,
                          bool fuse, std::string &error) {
  FailureOr<OwningOpRef<ModuleOp>> clone =
      partitionedCopy(module, error, /*schedule=*/true, fuse);
  if (failed(clone))
    return failure();
  return evaluatePartitioned(**clone, machine);
}

/// A module planned under one restriction of the axes, shared by the ZeRO
/// stages tried on it.
struct PlannedModule {
  OwningOpRef<ModuleOp> module;
  /// The training steps whose ZeRO stage is open, each with its own
  /// par.data_axis (null: none), which stage 0 keeps.
  SmallVector<std::pair<func::FuncOp, Attribute>> open;
  /// What the plan keeps per device: the first open step's, else the
  /// largest function's.
  Footprint footprint;
  /// The ZeRO stage a training step was given (0: none given), which the
  /// estimates apply where no step's stage is open.
  int64_t givenZero = 0;
  /// The planner of each function, for the records of the chosen plan.
  std::vector<std::unique_ptr<Planner>> planners;
  /// Whether the planners wrote their plans into `module` (done when the
  /// plan is first checked: a plan never checked needs no copy written).
  bool written = false;

  void write() {
    if (written)
      return;
    for (auto &planner : planners)
      planner->writeBack();
    written = true;
  }
  /// Names of its pipelined steps given `schedule=auto`.
  SmallVector<std::string> autoSchedule;
  /// Each schedule a check tries, with the share of the integer program's
  /// total its estimate takes (empty where the module is not pipelined).
  SmallVector<std::pair<std::string, double>> scheduleShares;
};

/// One plan considered: what each axis may split, and the ZeRO stage.
struct Candidate {
  SmallVector<AxisUse> uses;
  int64_t zero = 0;
  SmallVector<std::string> roles;
  double plannedSeconds = 0;
  /// The planner's estimate: the integer program's time and the bytes the
  /// plan keeps (arguments, gradients, activations) under this stage.
  double estimatedSeconds = 0;
  int64_t estimatedBytes = 0;
  std::shared_ptr<PlannedModule> planned;
  /// The exact check (partitioned, scheduled, memory planned), once made.
  bool checked = false;
  std::optional<Exact> exact;
  std::string error;
  /// Per training step, what --par-remat=auto chose so that this plan fits
  /// (its `exact` figures are with the recomputation); none when the plan
  /// recomputes nothing.
  std::optional<std::map<std::string, RematChoice>> remat;
  /// When recomputation was tried and nothing fitted: the smallest planned
  /// peak a choice of it reached.
  std::optional<int64_t> rematSmallest;
  /// The schedule chosen for pipelined steps given `schedule=auto` (empty
  /// when none is).
  std::string schedule;
  /// The axis of the pipeline stages, when a step is pipelined.
  std::optional<int32_t> pipelineAxis;
  /// The micro-batches of a step this plan pipelines itself (its batch
  /// divided into them); 0 when the step's pipeline, if any, was given.
  int64_t microbatches = 0;
  /// The tensor axis Megatron's sequence parallelism also splits the
  /// residual stream over (a variant of a checked plan), or -1.
  int32_t sequenceAxis = -1;
  /// Whether the plan's layouts of the step's values were dropped, its
  /// argument splits completed by propagation as a hand plan's are (a
  /// variant of a checked plan).
  bool propagated = false;
  /// Each schedule checked for schedule=auto: its step seconds and bytes
  /// per device (none when it did not partition).
  SmallVector<std::tuple<std::string, double, int64_t>> scheduleTrials;
  /// The schedules left unchecked, estimated slower than one that fits,
  /// with their estimates.
  SmallVector<std::pair<std::string, double>> schedulesSkipped;
  /// A plan pruned while planned (its integer program's bound shows it
  /// slower than prune= times the best estimate so far): the least
  /// its estimate could be.
  std::optional<double> prunedBound;

  double seconds() const {
    return exact ? exact->stepSeconds : estimatedSeconds;
  }
  int64_t bytes() const { return exact ? exact->arenaBytes : estimatedBytes; }
  bool fits(int64_t limit) const {
    return (!checked || exact) && bytes() <= limit;
  }

  std::string name(MeshOp mesh) const {
    std::string text;
    for (auto [a, role] : llvm::enumerate(roles)) {
      if (mesh.getAxisSizes()[a] == 1)
        continue;
      text += (text.empty() ? "" : " ") +
              cast<StringAttr>(mesh.getAxisNames()[a]).getValue().str() + ":" +
              role;
    }
    if (text.empty())
      text = "replicated";
    return text + (zero ? " zero=" + std::to_string(zero) : "") +
           (sequenceAxis >= 0 ? " sequence" : "") +
           (propagated ? " propagated" : "") + (remat ? " remat=auto" : "") +
           (microbatches ? " microbatches=" + std::to_string(microbatches)
                         : "") +
           (schedule.empty() ? "" : " schedule=" + schedule);
  }
};

/// How many plans that fit are checked exactly, best estimate first (then
/// only plans estimated faster than the best checked): the check
/// partitions the whole module, so its cost grows with the model while the
/// integer programs do not.
constexpr int kExactChecks = 3;
/// The fewest layers short-from= accepts: two copies of 3 and 4 layers cost
/// less to check than the whole step from here on.
constexpr int64_t kShortenedFrom = 8;
/// How far a shortened check's time may be from the whole module's: the
/// steps of plans completed by propagation, which may settle differently
/// at the ends of a shorter step, and the gradient collectives, which
/// overlap differently in a longer one (at most 1.4% on the steps of 48
/// layers or more of bench/autoshard; up to 24% on the 24-layer GPT 1.3B
/// for 1,024 devices, which short-from=48 checks whole).
constexpr double kShortenedMargin = 0.03;
/// A plan whose estimate is this many times the best checked plan's time
/// is not checked.
constexpr double kCheckMargin = 1.5;
/// Once a pipeline schedule of a plan is checked to fit, another schedule
/// is checked only when its estimate is within this factor of that one's
/// (the simulated schedules rank as their checks do on the bench's models,
/// 2-4% apart).
constexpr double kScheduleMargin = 1.01;
/// The most ops a step pipelined by --auto-shard itself may have once
/// copied per micro-batch (a micro-batch count that would make more is not
/// tried).
constexpr int64_t kMicrobatchedOps = 150000;
/// How many checked plans are checked again with Megatron's sequence
/// parallelism on their tensor axis: the best, and the best of Megatron's
/// shape (weights split over one axis only) where that is another.
constexpr int kSequenceChecks = 2;

/// The first axis a plan uses for data.
static std::optional<int32_t> dataAxisOf(ArrayRef<std::string> roles) {
  for (auto [a, role] : llvm::enumerate(roles))
    if (StringRef(role).starts_with("data"))
      return int32_t(a);
  return std::nullopt;
}

/// The axis Megatron's sequence parallelism splits the residual stream
/// over: one that splits weights and not the batch, on the fastest link
/// level among those (inside the nodes), the last on a tie. An axis that
/// splits both, or one across nodes, would split the sequence across
/// nodes (GPT 1.3B on 1,024 devices: 4.9 s a step against its base plan's
/// 0.10 s).
static std::optional<int32_t> tensorAxisOf(ArrayRef<std::string> roles,
                                           const MachineModel &machine) {
  std::optional<int32_t> axis;
  for (auto [a, role] : llvm::enumerate(roles))
    if (StringRef(role).contains("tensor") &&
        !StringRef(role).contains("data") &&
        (!axis || machine.axisLevel(int32_t(a)) <= machine.axisLevel(*axis)))
      axis = int32_t(a);
  return axis;
}

/// The name an axis `--mesh` named by position takes from its role: dp
/// (data), tp (tensor), os (optimizer states only), rep (replicated), pp
/// (pipeline stages); an axis with several roles joins them (dp_tp).
static std::string roleName(StringRef role) {
  SmallVector<StringRef> parts;
  role.split(parts, '+');
  std::string name;
  for (StringRef part : parts) {
    StringRef word = llvm::StringSwitch<StringRef>(part)
                         .Case("data", "dp")
                         .Case("tensor", "tp")
                         .Case("optimizer states", "os")
                         .Case("replicated", "rep")
                         .Case("pipeline", "pp")
                         .Default("");
    if (word.empty())
      return "";
    name += (name.empty() ? "" : "_") + word.str();
  }
  return name;
}

/// Renames the axes of `mesh` that par named by position (x, y, ...) after
/// the roles the plan gives them, keeping names unique on the mesh.
static void nameAxesByRole(MeshOp mesh, ArrayRef<std::string> roles) {
  SmallVector<int64_t> unnamed = getUnnamedAxes(mesh);
  if (unnamed.empty())
    return;
  llvm::StringSet<> taken;
  for (auto name : mesh.getAxisNames().getAsValueRange<StringAttr>())
    taken.insert(name);
  SmallVector<std::pair<StringAttr, StringAttr>> renamed;
  SmallVector<int64_t> left;
  for (int64_t axis : unnamed) {
    std::string name =
        axis < int64_t(roles.size()) ? roleName(roles[axis]) : std::string();
    if (name.empty()) {
      left.push_back(axis); // unused: keeps its name
      continue;
    }
    std::string unique = name;
    for (int n = 2; taken.contains(unique); ++n)
      unique = name + std::to_string(n);
    taken.insert(unique);
    auto old = cast<StringAttr>(mesh.getAxisNames()[axis]);
    renamed.push_back({old, StringAttr::get(mesh.getContext(), unique)});
  }
  renameMeshAxes(mesh, renamed);
  setUnnamedAxes(mesh, left);
}

struct AutoShardPass
    : public mlir::par::impl::AutoShardPassBase<AutoShardPass> {
  using AutoShardPassBase::AutoShardPassBase;

  /// Shared by every plan of one run (one mesh, one profile).
  PlanningCache planningCache;
  /// The per-device memory limit of the run.
  int64_t memoryLimit = 0;
  /// Plans are made and checked for the program --par-fuse makes.
  bool fusing = false;
  /// Deep steps are checked on shortened copies (checks=short).
  bool shortChecks = true;

  /// Per module the plans start from (the pass's module, or a copy with a
  /// step divided into micro-batches) and function, a planner built on it
  /// (graph and clusters, no axis placed) that the plans of copies of that
  /// module start from; null where building failed.
  std::map<std::pair<Operation *, std::string>, std::shared_ptr<Planner>>
      prototypes;

  /// Plans every function of `planned.module` in place under the
  /// candidate's axis uses, and records its roles and time, the open
  /// training steps and the footprint. With `mapping` (from `source` to
  /// `planned.module`, a copy of it whose stages may have been placed),
  /// each planner starts from the function's prototype in `source`. With
  /// `pruneAbove`, a plan whose program shows it estimated over that is
  /// pruned (fails with `candidate.prunedBound` set).
  LogicalResult planModule(PlannedModule &planned, const MachineModel &machine,
                           int64_t limit, Candidate &candidate, ModuleOp source,
                           const IRMapping *mapping,
                           std::optional<double> pruneAbove) {
    MeshOp mesh = *planned.module->getOps<MeshOp>().begin();
    candidate.plannedSeconds = 0;
    candidate.roles.clear();
    // The plan's estimate is at least its slowest function's program over
    // the stages of its pipelined steps (each stage's share of the whole
    // step is no less than an even one).
    int64_t stages = 1;
    for (auto func : planned.module->getOps<func::FuncOp>())
      if (std::optional<PipelineInfo> info = getPipeline(func);
          info && info->stages > 1)
        stages = stages == 1 ? info->stages : std::min(stages, info->stages);
    bool rolesFromStep = false, footprintFromStep = false;
    for (auto func : planned.module->getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      const Planner *prototype = nullptr;
      if (mapping) {
        auto [it, inserted] = prototypes.try_emplace(
            {source.getOperation(), func.getSymName().str()}, nullptr);
        if (inserted) {
          auto original = source.lookupSymbol<func::FuncOp>(func.getSymName());
          auto built = std::make_shared<Planner>(
              original, *source.getOps<MeshOp>().begin(), machine, limit,
              candidate.uses, planningCache, fusing);
          ScopedDiagnosticHandler quiet(func.getContext(),
                                        [](Diagnostic &) { return success(); });
          if (original && succeeded(built->build()))
            it->second = std::move(built);
        }
        prototype = it->second.get();
      }
      // A pipelined step's stages each hold their share of it, which the
      // program prices whole: its memory row takes the limit of all the
      // stages' devices together (the average stage's bound; the check
      // measures each stage).
      int64_t planLimit = limit;
      if (candidate.pipelineAxis && limit > 0 && getPipeline(func))
        planLimit = limit * mesh.getAxisSizes()[*candidate.pipelineAxis];
      Planner &planner = *planned.planners.emplace_back(
          prototype
              ? std::make_unique<Planner>(*prototype, func, mesh, *mapping,
                                          candidate.uses, planLimit)
              : std::make_unique<Planner>(func, mesh, machine, planLimit,
                                          candidate.uses, planningCache,
                                          fusing));
      if (pruneAbove)
        planner.pruneAbove = *pruneAbove * double(stages);
      planner.branchNodes = branchNodes;
      if ((!prototype && failed(planner.build())) || failed(planner.solve())) {
        if (planner.prunedAt)
          candidate.prunedBound = *planner.prunedAt / double(stages);
        return failure();
      }
      // The slowest function, as the check measures a plan.
      candidate.plannedSeconds =
          std::max(candidate.plannedSeconds, planner.predictedSeconds);
      bool training = false;
      func.walk([&](Operation *op) { training |= getPhase(op).has_value(); });
      SmallVector<std::string> roles = planner.axisRoles();
      // The roles (and the data axis ZeRO splits over) are the training
      // step's; without one, the first function's.
      if (candidate.roles.empty() || (training && !rolesFromStep))
        candidate.roles = roles;
      rolesFromStep |= training;
      bool isOpen = training && !func->hasAttr(ParDialect::kZeroAttrName);
      if (isOpen)
        planned.open.push_back(
            {func, func->getAttr(ParDialect::kDataAxisAttrName)});
      // A stage the user gave divides over the axis they named with it,
      // whatever role the plan gives that axis.
      std::optional<int32_t> dataAxis = dataAxisOf(roles);
      if (int64_t given = training ? getZeroStage(func) : 0; given > 0) {
        planned.givenZero = std::max(planned.givenZero, given);
        int64_t named = mesh.getAxisIndex(getDataAxis(func));
        dataAxis =
            named >= 0 ? std::optional<int32_t>(int32_t(named)) : std::nullopt;
      }
      if (!footprintFromStep) {
        Footprint f = planner.footprint(dataAxis);
        if (isOpen || f.bytes(0) > planned.footprint.bytes(0))
          planned.footprint = f;
        footprintFromStep = isOpen;
      }
    }
    return success();
  }

  /// Places the stages of the steps named in `steps` (given axis=auto) on
  /// `axis` of `module`'s mesh.
  static LogicalResult placeAutoStages(ModuleOp module,
                                       ArrayRef<std::string> steps,
                                       std::optional<int32_t> axis) {
    if (steps.empty() || !axis)
      return success();
    MeshOp mesh = *module.getOps<MeshOp>().begin();
    for (const std::string &name : steps) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      std::optional<PipelineInfo> info =
          func ? getPipeline(func) : std::nullopt;
      if (!info)
        return failure();
      info->axis =
          cast<StringAttr>(mesh.getAxisNames()[*axis]).getValue().str();
      info->stages = mesh.getAxisSizes()[*axis];
      if (failed(placeStages(func, *info)))
        return failure();
    }
    return success();
  }

  /// The training step --auto-shard may pipeline itself (pipeline=auto):
  /// the module's only training step, not pipelined by --par-pipeline,
  /// with two or more layers and data arguments that share a batch.
  struct OpenStep {
    std::string name;
    int64_t layers = 0;
    int64_t batch = 0;
    int64_t ops = 0;
  };
  static std::optional<OpenStep> openPipelineStep(ModuleOp module) {
    std::optional<OpenStep> found;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!isTrainingStep(func))
        continue;
      if (found || getPipeline(func))
        return std::nullopt;
      OpenStep step{func.getSymName().str(),
                    int64_t(forwardLayers(func).size()), 0,
                    int64_t(func.getBody().front().getOperations().size())};
      for (BlockArgument arg : dataArguments(func)) {
        auto type = dyn_cast<RankedTensorType>(arg.getType());
        if (!type || !type.hasStaticShape() || type.getRank() == 0 ||
            (step.batch && step.batch != type.getDimSize(0)))
          return std::nullopt;
        step.batch = type.getDimSize(0);
      }
      if (step.layers < 2 || step.batch < 2)
        return std::nullopt;
      found = step;
    }
    return found;
  }

  /// The micro-batch counts tried for p stages over a batch of `batch`
  /// rows: the two smallest divisors of the batch that are at least p
  /// (fewer micro-batches than stages leaves a stage idle; more shrink
  /// the bubble, (p-1)/m, at the price of smaller, less efficient pieces,
  /// which the check of each plan weighs).
  static SmallVector<int64_t> microbatchChoices(int64_t batch, int64_t p) {
    SmallVector<int64_t> choices;
    for (int64_t m = p; m <= batch && choices.size() < 2; ++m)
      if (batch % m == 0)
        choices.push_back(m);
    return choices;
  }

  /// Whether a sharding anywhere in `module` names mesh axis `axis`.
  static bool shardingsName(ModuleOp module, StringRef axis) {
    return module
        .walk([&](Operation *op) {
          return shardingsUseAxis(op->getAttrDictionary(), axis)
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        })
        .wasInterrupted();
  }

  /// The pipelined steps of `module` whose schedule is left to
  /// --auto-shard (`schedule=auto`).
  static SmallVector<func::FuncOp> autoScheduled(ModuleOp module) {
    SmallVector<func::FuncOp> steps;
    for (auto func : module.getOps<func::FuncOp>())
      if (std::optional<PipelineInfo> info = getPipeline(func))
        if (info->schedule == "auto")
          steps.push_back(func);
    return steps;
  }

  /// Gives the open training steps of a candidate's module its ZeRO stage
  /// (the stages of one plan share the module), and its pipelined steps
  /// the schedule chosen for it.
  static void setStage(const Candidate &candidate) {
    PlannedModule &planned = *candidate.planned;
    planned.write();
    MeshOp mesh = *planned.module->getOps<MeshOp>().begin();
    for (const std::string &name : planned.autoSchedule)
      if (auto func = planned.module->lookupSymbol<func::FuncOp>(name))
        if (std::optional<PipelineInfo> info = getPipeline(func)) {
          info->schedule =
              candidate.schedule.empty() ? "auto" : candidate.schedule;
          // Interleaving places the layers again, in two chunks per device
          // (checked possible before it is tried).
          int64_t chunks = info->schedule == "interleaved" ? 2 : 1;
          if (info->virtualStages != chunks) {
            info->virtualStages = chunks;
            (void)placeStages(func, *info);
          } else {
            setPipeline(func, *info);
          }
        }
    for (auto [func, before] : planned.open) {
      if (candidate.zero > 0) {
        setZero(
            func, candidate.zero,
            cast<StringAttr>(mesh.getAxisNames()[*dataAxisOf(candidate.roles)])
                .getValue());
      } else {
        func->removeAttr(ParDialect::kZeroAttrName);
        if (before)
          func->setAttr(ParDialect::kDataAxisAttrName, before);
        else
          func->removeAttr(ParDialect::kDataAxisAttrName);
      }
    }
  }

  /// The schedules a plan's pipelined steps given `schedule=auto` are
  /// checked with ("" where it has none): gpipe, 1f1b and zb-h1, and
  /// interleaved (two chunks per device) where every such step has a layer
  /// per chunk and micro-batches in groups of its stages.
  static SmallVector<std::string> scheduleTrials(PlannedModule &planned) {
    if (planned.autoSchedule.empty())
      return {""};
    SmallVector<std::string> schedules{"1f1b", "zb-h1", "gpipe"};
    bool interleave = true;
    for (const std::string &name : planned.autoSchedule) {
      auto func = planned.module->lookupSymbol<func::FuncOp>(name);
      std::optional<PipelineInfo> info =
          func ? getPipeline(func) : std::nullopt;
      // A placement the user gave (layers=, stage marks) is kept.
      interleave &= info && !info->userPlaced && info->stages > 1 &&
                    int64_t(forwardLayers(func).size()) >= 2 * info->stages &&
                    info->microbatches % info->stages == 0;
    }
    if (interleave)
      schedules.push_back("interleaved");
    return schedules;
  }

  /// The share of the integer program's total (the whole step priced on
  /// each stage's devices) that a pipelined plan's step takes, as the
  /// check times it with the partitioned stages: the busiest stage's share
  /// of the seconds its ops compute for as planned, times one plus the
  /// bubble its schedule leaves, simulated with the stages' FLOPs per
  /// slot; the best of the schedules the check tries. An
  /// interleaved trial of a step placed in one chunk per device splits each
  /// device's work evenly between its two chunks. 1 for an unpipelined plan.
  /// Each schedule's share is recorded in `planned.scheduleShares` (the
  /// module's: its slowest pipelined step's under that trial).
  static double pipelineShare(PlannedModule &planned) {
    SmallVector<std::string> trials = scheduleTrials(planned);
    SmallVector<double> shares(trials.size(), 0.0);
    for (auto func : planned.module->getOps<func::FuncOp>()) {
      std::optional<PipelineInfo> info = getPipeline(func);
      if (!info || info->stages <= 1 || func.isDeclaration())
        continue;
      bool open = llvm::is_contained(planned.autoSchedule, func.getSymName());
      auto planner = llvm::find_if(planned.planners, [&](const auto &p) {
        return p->function() == func;
      });
      if (planner == planned.planners.end())
        continue;
      auto seconds = [&](Operation *op) { return (*planner)->opSeconds(op); };
      // A step whose schedule is given runs it under every trial.
      auto scheduleOf = [&](const std::string &trialName) {
        return open ? trialName : info->schedule;
      };
      // Slot work in FLOPs and in seconds, measured once for every trial
      // (a zb-h1 trial moves the weight-gradient ops to W slots).
      StepSlotWork measured = stepSlotWork(
          func, *info, seconds, llvm::any_of(trials, [&](const auto &name) {
            return scheduleOf(name) == "zb-h1";
          }));
      for (auto [i, trialName] : llvm::enumerate(trials)) {
        std::string schedule = scheduleOf(trialName);
        PipelineInfo trial = *info;
        trial.schedule = schedule;
        std::pair<SlotTimes, SlotTimes> work =
            schedule == "zb-h1" ? std::make_pair(measured.zeroBubbleFlops,
                                                 measured.zeroBubbleCost)
                                : std::make_pair(measured.flops, measured.cost);
        if (schedule == "interleaved" && trial.virtualStages == 1) {
          trial.virtualStages = 2;
          auto halve = [&](const SlotTimes &times) {
            SlotTimes halves(trial.chunks());
            for (int64_t c = 0; c < trial.chunks(); ++c) {
              int64_t d = trial.deviceOf(c);
              halves.forward[c] = times.forward[d] / 2;
              halves.backward[c] = times.backward[d] / 2;
              halves.weight[c] = times.weight[d] / 2;
            }
            return halves;
          };
          work = {halve(work.first), halve(work.second)};
        }
        // As the check: the busiest stage's time (its ops' seconds: a
        // stage of more memory-bound work than its FLOPs' share is the
        // slower) and the bubble the schedule leaves with the stages'
        // FLOPs.
        double bubble = simulateSchedule(trial, work.first).bubble;
        SmallVector<double> busy(trial.stages, 0.0);
        double total = 0;
        for (int64_t c = 0; c < trial.chunks(); ++c) {
          double w = work.second.forward[c] + work.second.backward[c] +
                     work.second.weight[c];
          busy[trial.deviceOf(c)] += w;
          total += w;
        }
        double busiest = total > 0 ? *llvm::max_element(busy) / total
                                   : 1.0 / double(trial.stages);
        shares[i] = std::max(shares[i], (1 + bubble) * busiest);
      }
    }
    planned.scheduleShares.clear();
    double best = std::numeric_limits<double>::infinity();
    for (auto [schedule, share] : llvm::zip(trials, shares))
      if (share > 0) {
        // To 12 digits: schedules of the same length (gpipe and 1f1b on
        // even stages) tie and keep the order they are tried in.
        share = std::round(share * 1e12) / 1e12;
        planned.scheduleShares.push_back({schedule, share});
        best = std::min(best, share);
      }
    return planned.scheduleShares.empty() ? 1.0 : best;
  }

  /// Partitions a candidate's module with its ZeRO stage and plans its
  /// memory.
  /// With `shortStages` false, a pipelined plan is checked whole.
  void check(Candidate &candidate, const MachineModel &machine,
             bool shortStages) {
    candidate.checked = true;
    // Pipelined steps given schedule=auto: the schedules are checked (as
    // below), and the fastest checked that fits (else the smallest) is the
    // plan's.
    SmallVector<std::string> schedules = scheduleTrials(*candidate.planned);
    // With each schedule estimated, the best estimate is checked first, and
    // once one fits, a schedule estimated slower (beyond kScheduleMargin)
    // is not checked: each is a partition of the whole step's
    // micro-batches, or a split of one into stages.
    const auto &shares = candidate.planned->scheduleShares;
    auto shareOf = [&](StringRef schedule) -> std::optional<double> {
      for (const auto &[name, share] : shares)
        if (name == schedule)
          return share;
      return std::nullopt;
    };
    bool estimated = llvm::all_of(
        schedules, [&](const std::string &s) { return bool(shareOf(s)); });
    if (estimated)
      llvm::stable_sort(schedules,
                        [&](const std::string &a, const std::string &b) {
                          return *shareOf(a) < *shareOf(b);
                        });
    // The first schedule checked to fit: its share and its checked step.
    std::optional<double> fitShare;
    double fitSeconds = 0;
    // The schedules of the same stages (all but interleaving) share their
    // partitioned copies: only --par-schedule reads which schedule it is.
    std::optional<FailureOr<StageChecks>> partitioned;
    std::string partitionError;
    for (const std::string &schedule : schedules) {
      if (estimated && fitShare &&
          *shareOf(schedule) > kScheduleMargin * *fitShare) {
        // Its estimate on the check's scale: the fitting schedule's
        // checked step times the ratio of their estimates.
        candidate.schedulesSkipped.push_back(
            {schedule, fitSeconds * *shareOf(schedule) / *fitShare});
        continue;
      }
      Candidate trial = candidate;
      trial.schedule = schedule;
      setStage(trial);
      std::string why;
      FailureOr<Exact> exact = failure();
      if (!schedule.empty() && schedule != "interleaved") {
        if (!partitioned)
          partitioned =
              partitionStages(*candidate.planned->module,
                              /*schedule=*/false, shortStages, partitionError);
        why = partitionError;
        if (succeeded(*partitioned))
          exact = evaluateStages(**partitioned, *candidate.planned->module,
                                 candidate.planned->autoSchedule, schedule,
                                 machine, why);
      } else {
        exact =
            checkFigures(*candidate.planned->module, machine, why, shortStages);
      }
      if (failed(exact)) {
        if (!candidate.exact)
          candidate.error = why.empty() ? "does not partition" : why;
        continue;
      }
      if (!schedule.empty())
        candidate.scheduleTrials.push_back(
            {schedule, exact->stepSeconds, exact->arenaBytes});
      bool fits = exact->arenaBytes <= memoryLimit;
      if (fits && estimated && !fitShare) {
        fitShare = shareOf(schedule);
        fitSeconds = exact->stepSeconds;
      }
      bool bestFits =
          candidate.exact && candidate.exact->arenaBytes <= memoryLimit;
      if (!candidate.exact || (fits && !bestFits) ||
          (fits && exact->stepSeconds < candidate.exact->stepSeconds) ||
          (!fits && !bestFits &&
           exact->arenaBytes < candidate.exact->arenaBytes)) {
        candidate.exact = *exact;
        candidate.schedule = schedule;
        candidate.error.clear();
      }
    }
    setStage(candidate);
  }

  /// The step of `module` a check reads off shortened copies: under
  /// checks=short, one of short-from layers or more whose middle layers are
  /// copies (none otherwise).
  std::optional<ShortenableStep> stepToShorten(ModuleOp module) const {
    if (!shortChecks)
      return std::nullopt;
    std::string unused;
    std::optional<ShortenableStep> step = shortenableStep(module, unused);
    if (!step || step->layers < shortFrom)
      return std::nullopt;
    return step;
  }

  /// The checked figures of `module`: read off two shortened copies of its
  /// step where it has short-from layers or more and its middle layers
  /// are copies (checks=short; of a pipelined step, copies that keep one
  /// and two layers of each virtual stage, partitionStages), else of the
  /// whole module. A shortened copy that does not partition leaves the
  /// check to the whole module.
  FailureOr<Exact> checkFigures(ModuleOp module, const MachineModel &machine,
                                std::string &why, bool shortStages = true) {
    if (!layersPerChunk(module).empty()) {
      FailureOr<StageChecks> checks =
          partitionStages(module, /*schedule=*/true, shortStages, why);
      if (failed(checks))
        return failure();
      return evaluateStages(*checks, module, {}, "", machine, why);
    }
    if (std::optional<ShortenableStep> step = stepToShorten(module)) {
      std::string unused;
      // The 3-layer copy is made from the 4-layer one (layers 0, 1 and
      // the last of both).
      OwningOpRef<ModuleOp> four = shortenedCopy(module, 3, unused);
      OwningOpRef<ModuleOp> three =
          four ? shortenedCopy(*four, 2, unused) : nullptr;
      std::string shortWhy;
      if (three) {
        FailureOr<Exact> a = evaluate(*three, machine, fusing, shortWhy);
        if (succeeded(a))
          if (FailureOr<Exact> b = evaluate(*four, machine, fusing, shortWhy);
              succeeded(b))
            // A layer more never takes less time or memory; where the
            // copies say so, their ends weigh more than a layer (the
            // whole module is checked).
            if (b->stepSeconds >= a->stepSeconds &&
                b->arenaBytes >= a->arenaBytes)
              return extrapolate(*a, *b, step->layers);
      }
    }
    return evaluate(module, machine, fusing, why);
  }

  /// What the check of a pipelined plan partitions: two copies of its step
  /// that keep one and two layers of each virtual stage (shortenedStages;
  /// checks=short, a step of short-from layers or more whose copies
  /// have fewer layers together than it has), else the whole module.
  struct StageChecks {
    SmallVector<OwningOpRef<ModuleOp>, 2> partitioned;
    /// The layers of each virtual stage: of each copy, and of the step.
    SmallVector<SmallVector<int64_t>, 2> layers;
    SmallVector<int64_t> whole;
  };
  FailureOr<StageChecks> partitionStages(ModuleOp module, bool schedule,
                                         bool shortStages, std::string &why) {
    StageChecks checks;
    std::string unused;
    std::optional<ShortenableStep> step =
        shortStages ? stepToShorten(module) : std::nullopt;
    if (step && !step->chunkLayers.empty()) {
      // The copy with one layer a stage is made from the one with two
      // (which keeps the same first layers of each stage).
      OwningOpRef<ModuleOp> more = shortenedStages(module, 2, unused);
      OwningOpRef<ModuleOp> fewer =
          more ? shortenedStages(*more, 1, unused) : nullptr;
      if (fewer) {
        SmallVector<int64_t> a = layersPerChunk(*fewer),
                             b = layersPerChunk(*more);
        if (llvm::sum_of(a) + llvm::sum_of(b) < step->layers) {
          FailureOr<OwningOpRef<ModuleOp>> x =
              partitionedCopy(*fewer, unused, schedule, fusing);
          FailureOr<OwningOpRef<ModuleOp>> y =
              succeeded(x) ? partitionedCopy(*more, unused, schedule, fusing)
                           : FailureOr<OwningOpRef<ModuleOp>>(failure());
          if (succeeded(y)) {
            checks.partitioned.push_back(std::move(*x));
            checks.partitioned.push_back(std::move(*y));
            checks.layers = {a, b};
            checks.whole = step->chunkLayers;
            return checks;
          }
        }
      }
    }
    FailureOr<OwningOpRef<ModuleOp>> whole =
        partitionedCopy(module, why, schedule, fusing);
    if (failed(whole))
      return failure();
    checks.partitioned.push_back(std::move(*whole));
    return checks;
  }

  /// The checked figures of a pipelined plan from its partitioned copies
  /// (`checks`, of `module`) under `schedule` (the steps named in
  /// `functions` scheduled so; empty: as partitioned). Where the shortened
  /// copies' figures do not extrapolate, the whole module is checked.
  FailureOr<Exact> evaluateStages(const StageChecks &checks, ModuleOp module,
                                  ArrayRef<std::string> functions,
                                  StringRef schedule,
                                  const MachineModel &machine,
                                  std::string &why) {
    auto figuresOf = [&](ModuleOp partitioned) -> FailureOr<Exact> {
      if (schedule.empty())
        return evaluatePartitioned(partitioned, machine);
      FailureOr<OwningOpRef<ModuleOp>> scheduled =
          scheduledCopy(partitioned, functions, schedule, why);
      if (failed(scheduled))
        return failure();
      return evaluatePartitioned(**scheduled, machine);
    };
    if (checks.partitioned.size() == 1)
      return figuresOf(*checks.partitioned.front());
    FailureOr<Exact> a = figuresOf(*checks.partitioned[0]);
    FailureOr<Exact> b = succeeded(a) ? figuresOf(*checks.partitioned[1])
                                      : FailureOr<Exact>(failure());
    if (succeeded(b)) {
      FailureOr<Exact> grown = extrapolateStages(
          *a, *b, checks.layers[0], checks.layers[1], checks.whole);
      // A layer more never takes less time or memory.
      if (succeeded(grown) && b->stepSeconds >= a->stepSeconds &&
          b->arenaBytes >= a->arenaBytes)
        return grown;
    }
    why.clear();
    FailureOr<OwningOpRef<ModuleOp>> whole =
        partitionedCopy(module, why, /*schedule=*/schedule.empty(), fusing);
    if (failed(whole))
      return failure();
    return figuresOf(**whole);
  }

  /// A whole check made, by the hash of the shortened copies' program it
  /// replaced (checkWhole).
  struct WholeCheck {
    llvm::hash_code key;
    FailureOr<Exact> exact;
    std::string why;
  };
  std::vector<WholeCheck> wholeChecks;
  /// Plans that took another plan's whole check.
  int64_t wholeChecksShared = 0;

  /// Checks `candidate` again on the whole module where its figures were
  /// read off shortened copies.
  void checkWhole(Candidate &candidate, const MachineModel &machine) {
    if (!candidate.exact || !candidate.exact->shortenedLayers)
      return;
    // Plans whose shortened copies partitioned to the same program (a
    // sequence-parallel variant and its base plan completed by
    // propagation: the one splits the residual stream over the sequence,
    // the other carries it as partial sums the partitioner reduce-scatters)
    // partition whole to the same program too, its middle layers being
    // copies: the first one's check is the other's. Not for a pipelined
    // step, whose schedule is a mark the program's hash leaves out.
    std::optional<llvm::hash_code> key;
    if (!candidate.exact->pipeline)
      key = candidate.exact->program;
    auto same = key ? llvm::find_if(wholeChecks,
                                    [&](const WholeCheck &done) {
                                      return done.key == *key;
                                    })
                    : wholeChecks.end();
    std::string why;
    FailureOr<Exact> exact = failure();
    if (same != wholeChecks.end()) {
      exact = same->exact;
      why = same->why;
      ++wholeChecksShared;
    } else {
      setStage(candidate);
      exact = evaluate(*candidate.planned->module, machine, fusing, why);
      if (key)
        wholeChecks.push_back({*key, exact, why});
    }
    if (succeeded(exact)) {
      // The skipped schedules' estimates were scaled to the figures of the
      // copies: scaled again to the whole check.
      double before = candidate.exact->stepSeconds;
      if (before > 0)
        for (auto &[schedule, seconds] : candidate.schedulesSkipped)
          seconds *= exact->stepSeconds / before;
      candidate.exact = *exact;
      for (auto &[schedule, seconds, bytes] : candidate.scheduleTrials)
        if (schedule == candidate.schedule) {
          seconds = exact->stepSeconds;
          bytes = exact->arenaBytes;
        }
    } else {
      candidate.exact.reset();
      candidate.error = why.empty() ? "does not partition" : why;
    }
  }

  /// Whether `candidate` fits `limit` with recomputation: its module is
  /// copied, --par-remat=auto chooses under the limit, and the copy is
  /// checked again; on success the candidate takes the checked figures and
  /// the choice.
  bool tryRemat(Candidate &candidate, const MachineModel &machine,
                int64_t limit) {
    setStage(candidate);
    OwningOpRef<ModuleOp> copy = candidate.planned->module->clone();
    SmallVector<func::FuncOp> steps = openTrainingSteps(*copy);
    FailureOr<std::map<std::string, RematChoice>> chosen = failure();
    OwningOpRef<ModuleOp> partitioned;
    int64_t smallest = 0;
    {
      // A plan that cannot fit even so is just not an alternative.
      ScopedDiagnosticHandler quiet(copy->getContext(),
                                    [](Diagnostic &) { return success(); });
      chosen = planRemat(*copy, steps, limit, /*checkpointAxis=*/"", fusing,
                         candidate.exact ? &candidate.exact->measured : nullptr,
                         &partitioned, &smallest);
    }
    if (failed(chosen)) {
      if (smallest > 0)
        candidate.rematSmallest = smallest;
      return false;
    }
    for (func::FuncOp func : steps)
      if (failed(applyRemat(func, chosen->at(func.getSymName().str()).modes,
                            "auto")))
        return false;
    // The choice was checked on a partitioned copy: its figures are read
    // there rather than partitioning the same module again.
    std::string why;
    FailureOr<Exact> exact = partitioned
                                 ? evaluatePartitioned(*partitioned, machine)
                                 : evaluate(*copy, machine, fusing, why);
    if (failed(exact) || exact->arenaBytes > limit)
      return false;
    candidate.exact = *exact;
    candidate.remat = std::move(*chosen);
    return true;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    planningCache.clear();
    wholeChecks.clear();
    wholeChecksShared = 0;
    // The prototypes point into this run's modules.
    auto dropPrototypes = llvm::make_scope_exit([&] { prototypes.clear(); });
    // Recomputation is open where the module has training steps and the
    // user gave none of them a mode; "given" where some step has one.
    bool rematGiven = llvm::any_of(
        module.getOps<func::FuncOp>(), [](func::FuncOp func) {
          return func->hasAttr(ParDialect::kRematAttrName);
        });
    bool rematOpen = !rematGiven && !openTrainingSteps(module).empty();
    auto meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.size() != 1) {
      module.emitError() << "--auto-shard: plans over one device mesh; the "
                            "module declares "
                         << meshes.size()
                         << " (give one with --mesh=4x4x2 or --mesh=dp=8,tp=8)";
      return signalPassFailure();
    }
    MeshOp mesh = meshes.front();
    FailureOr<MachineModel> machine =
        MachineModel::load(hardware, mesh.getAxisSizes(),
                           [&] { return module.emitError("--auto-shard: "); });
    if (failed(machine))
      return signalPassFailure();
    int64_t limit = machine->profile().memoryBytes;
    if (!memory.empty()) {
      std::optional<int64_t> parsed = parseByteSize(memory);
      if (!parsed) {
        module.emitError() << "--auto-shard: memory='" << memory
                           << "' is not a size (examples: 40GiB, 80GB, "
                              "512MiB, 1000000)";
        return signalPassFailure();
      }
      limit = *parsed;
    }
    memoryLimit = limit;

    // The plans considered: every axis free (the integer program decides),
    // then each axis restricted to data or to tensor parallelism (pure data
    // parallel, pure tensor parallel, Megatron's data x tensor), each with
    // every ZeRO stage a training step left open can take. Each is
    // estimated by the planner; the best estimates are checked exactly
    // (partitioned and memory planned), and the fastest checked plan that
    // fits wins.
    // A pipelined step's axis holds its stages: no plan splits over it.
    // Steps given axis=auto (--par-pipeline) have their stages placed on
    // each axis that can hold them (as many layers as virtual stages, no
    // sharding naming it), and the plans over every such axis compete.
    std::optional<int32_t> namedPipelineAxis;
    SmallVector<std::string> autoAxisSteps;
    int64_t fewestChunks = 0;
    for (auto func : module.getOps<func::FuncOp>())
      if (std::optional<PipelineInfo> info = getPipeline(func)) {
        if (info->axis == "auto") {
          autoAxisSteps.push_back(func.getSymName().str());
          int64_t layers = int64_t(forwardLayers(func).size());
          int64_t most = layers / std::max<int64_t>(1, info->virtualStages);
          fewestChunks = fewestChunks ? std::min(fewestChunks, most) : most;
        } else if (mesh.getAxisIndex(info->axis) >= 0) {
          namedPipelineAxis = int32_t(mesh.getAxisIndex(info->axis));
        }
      }
    // The pipelines a plan may have: the step's own (or none), or with
    // axis=auto the stages on each axis that can hold them; with
    // pipeline=auto and no --par-pipeline, also the step's stages on each
    // such axis, its batch divided into micro-batches (microbatches > 0).
    struct PipelineChoice {
      std::optional<int32_t> axis;
      int64_t microbatches = 0;
    };
    auto canHoldStages = [&](int64_t a, int64_t size, int64_t chunks) {
      StringRef name = cast<StringAttr>(mesh.getAxisNames()[a]).getValue();
      return size > 1 && size <= chunks && !shardingsName(module, name);
    };
    SmallVector<PipelineChoice> pipelineChoices;
    std::optional<OpenStep> openStep;
    if (pipeline != "auto" && pipeline != "off") {
      module.emitError() << "--auto-shard: pipeline='" << pipeline
                         << "' is not auto or off";
      return signalPassFailure();
    }
    if (sequence != "auto" && sequence != "off") {
      module.emitError() << "--auto-shard: sequence='" << sequence
                         << "' is not auto or off";
      return signalPassFailure();
    }
    // par-opt turns auto into on where --par-fuse follows (par-opt.cpp).
    if (fuse != "auto" && fuse != "on" && fuse != "off") {
      module.emitError() << "--auto-shard: fuse='" << fuse
                         << "' is not auto, on or off";
      return signalPassFailure();
    }
    fusing = fuse == "on";
    if (checks != "short" && checks != "whole") {
      module.emitError() << "--auto-shard: checks='" << checks
                         << "' is not short or whole";
      return signalPassFailure();
    }
    shortChecks = checks == "short";
    if (shortFrom < kShortenedFrom) {
      module.emitError() << "--auto-shard: short-from=" << int64_t(shortFrom)
                         << " is under " << kShortenedFrom
                         << " (copies of 3 and 4 layers would not be "
                            "shorter than the step)";
      return signalPassFailure();
    }
    if (branchNodes < 0) {
      module.emitError()
          << "--auto-shard: branch-nodes=" << int64_t(branchNodes)
          << " is negative (a node limit, or 0 for no branch try)";
      return signalPassFailure();
    }
    std::optional<double> pruneMargin;
    if (prune != "off") {
      double margin = 0;
      if (StringRef(prune).getAsDouble(margin) || !(margin >= 1)) {
        module.emitError() << "--auto-shard: prune='" << prune
                           << "' is not a number of 1 or more, or off";
        return signalPassFailure();
      }
      pruneMargin = margin;
    }
    if (autoAxisSteps.empty()) {
      pipelineChoices.push_back({namedPipelineAxis, 0});
      if (pipeline == "auto" && !namedPipelineAxis)
        openStep = openPipelineStep(module);
      // Stages of two or more layers each (a stage of one layer spends
      // as much on its transfers as on its work), and micro-batch counts
      // whose copies of the step stay within kMicrobatchedOps ops (the
      // plan and its check work on all of them).
      if (openStep)
        for (auto [a, size] : llvm::enumerate(mesh.getAxisSizes()))
          if (canHoldStages(a, size, openStep->layers / 2))
            for (int64_t m : microbatchChoices(openStep->batch, size))
              if (m * openStep->ops <= kMicrobatchedOps)
                pipelineChoices.push_back({int32_t(a), m});
    } else {
      for (auto [a, size] : llvm::enumerate(mesh.getAxisSizes()))
        if (canHoldStages(a, size, fewestChunks))
          pipelineChoices.push_back({int32_t(a), 0});
      if (pipelineChoices.empty()) {
        module.emitError()
            << "--auto-shard: no mesh axis can hold the pipeline stages of @"
            << autoAxisSteps.front()
            << " (axis=auto): each needs more than one device, no more "
               "devices than the step has layers per chunk ("
            << fewestChunks << "), and no sharding that names it";
        return signalPassFailure();
      }
    }
    std::vector<Candidate> plans;
    for (const PipelineChoice &choice : pipelineChoices) {
      std::optional<int32_t> pipelineAxis = choice.axis;
      SmallVector<int32_t> splitAxes;
      for (auto [a, size] : llvm::enumerate(mesh.getAxisSizes()))
        if (size > 1 && int32_t(a) != pipelineAxis)
          splitAxes.push_back(int32_t(a));
      Candidate free;
      free.uses.assign(mesh.getNumAxes(), AxisUse::Free);
      free.pipelineAxis = pipelineAxis;
      free.microbatches = choice.microbatches;
      if (pipelineAxis)
        free.uses[*pipelineAxis] = AxisUse::Pipeline;
      plans.push_back(free);
      // A pipeline of --auto-shard's own is planned free only (the integer
      // program chooses the other axes' roles), which keeps the search to
      // one plan per axis and micro-batch count.
      if (splitAxes.size() <= 4 && !choice.microbatches)
        for (unsigned mask = 0; mask < (1u << splitAxes.size()); ++mask) {
          Candidate restricted = free;
          for (auto [i, a] : llvm::enumerate(splitAxes))
            restricted.uses[a] =
                mask & (1u << i) ? AxisUse::Tensor : AxisUse::Data;
          plans.push_back(restricted);
        }
    }

    std::vector<Candidate> considered;
    // The step divided into each count of micro-batches tried (null where
    // it cannot be), shared by the plans that pipeline it over any axis.
    std::map<int64_t, OwningOpRef<ModuleOp>> microbatched;
    // Fitting plans first, then the faster, then the smaller.
    auto better = [&](const Candidate &a, const Candidate &b) {
      if (a.fits(limit) != b.fits(limit))
        return a.fits(limit);
      if (a.checked && b.checked && !a.exact != !b.exact)
        return bool(a.exact);
      if (a.fits(limit))
        return a.seconds() < b.seconds();
      return a.bytes() < b.bytes();
    };
    // A check also measures what the estimate leaves out for its module
    // (temporaries, the exact lifetimes): the module's other stages are
    // estimated again with it, and not checked when they cannot fit.
    // Estimates are compared with the estimate of the fastest plan checked
    // to fit, not with its check: an estimate can be off by a factor (on
    // many devices, where op overheads and small collectives dominate),
    // but plans are estimated alike.
    int fitting = 0, checks = 0;
    std::optional<double> bestChecked, bestCheckedEstimate;
    llvm::DenseMap<PlannedModule *, int64_t> unmodelled;
    // The smallest estimate of each planned module's plans checked to fit.
    llvm::DenseMap<PlannedModule *, double> moduleFits;
    SmallVector<Candidate *> skipped;
    auto checkOne = [&](Candidate &candidate) {
      // The first plan checked, the best estimate, is the likeliest to be
      // chosen, and the chosen plan is checked whole: a pipelined one is
      // checked whole at once (its shortened copies cost about half of its
      // whole check, where an unpipelined step's cost 7 of its layers).
      check(candidate, *machine, /*shortStages=*/checks > 0);
      // Whether a plan fits is the whole module's to say (and a
      // recomputation trial starts from its measurements).
      if (candidate.exact && candidate.exact->arenaBytes > limit)
        checkWhole(candidate, *machine);
      ++checks;
      if (candidate.exact) {
        int64_t missing =
            candidate.exact->arenaBytes - candidate.estimatedBytes;
        auto [it, inserted] =
            unmodelled.try_emplace(candidate.planned.get(), missing);
        if (!inserted)
          it->second = std::max(it->second, missing);
      }
      if (candidate.exact && candidate.exact->arenaBytes <= limit) {
        // Only a whole check says a module fits: figures read off
        // shortened copies may be checked whole later and found over.
        if (!candidate.exact->shortenedLayers) {
          auto [it, inserted] = moduleFits.try_emplace(
              candidate.planned.get(), candidate.estimatedSeconds);
          if (!inserted)
            it->second = std::min(it->second, candidate.estimatedSeconds);
        }
        ++fitting;
        if (!bestChecked || candidate.exact->stepSeconds < *bestChecked) {
          bestChecked = candidate.exact->stepSeconds;
          bestCheckedEstimate = candidate.estimatedSeconds;
        }
      }
    };
    // Plans are pruned while planned (their programs not solved) where the
    // program's bound shows them far slower than the best estimate so far;
    // where a pruned plan could have been checked (below), the plans are
    // made and checked again with nothing pruned, so pruning never changes
    // the plan chosen. Counted: plans pruned, and pruned then made again.
    int pruned = 0, unpruned = 0;
    for (bool pruning : {bool(pruneMargin), false}) {
      considered.clear();
      fitting = checks = 0;
      bestChecked.reset();
      bestCheckedEstimate.reset();
      unmodelled.clear();
      moduleFits.clear();
      skipped.clear();
      SmallVector<double> prunedBounds;
      for (auto [i, plan] : llvm::enumerate(plans)) {
        // Pruned: a plan whose integer program shows it estimated over
        // prune= times the best estimate of a plan estimated to fit.
        std::optional<double> pruneAbove;
        if (pruning)
          for (const Candidate &other : considered)
            if (other.fits(limit))
              pruneAbove = std::min(pruneAbove.value_or(HUGE_VAL),
                                    *pruneMargin * other.estimatedSeconds);
        plan.prunedBound.reset();
        auto planned = std::make_shared<PlannedModule>();
        {
          // The free plan's errors are the user's; a restricted plan that
          // cannot be made is just not an alternative (nor is a pipeline
          // axis the stages cannot be placed on).
          std::optional<ScopedDiagnosticHandler> quiet;
          if (i > 0 || !autoAxisSteps.empty())
            quiet.emplace(module.getContext(),
                          [&](Diagnostic &) { return success(); });
          SmallVector<std::string> placed(autoAxisSteps);
          ModuleOp source = module;
          if (plan.microbatches) {
            // Pipelined here: the step's batch divided into the
            // micro-batches (as --par-pipeline="axis=auto divide-batch"
            // would), its schedules checked best estimate first.
            auto [it, inserted] = microbatched.try_emplace(plan.microbatches);
            if (inserted) {
              OwningOpRef<ModuleOp> divided = module.clone();
              auto step = divided->lookupSymbol<func::FuncOp>(openStep->name);
              PipelineInfo info;
              info.microbatches = plan.microbatches;
              info.schedule = "auto";
              info.dividedBatch = true;
              if (succeeded(microbatchForAutoShard(step, info)))
                it->second = std::move(divided);
            }
            if (!it->second)
              continue;
            source = *it->second;
            placed.push_back(openStep->name);
          }
          IRMapping mapping;
          planned->module =
              OwningOpRef<ModuleOp>(cast<ModuleOp>(source->clone(mapping)));
          // The planners' graphs do not depend on where the stages are
          // placed (but fused groups end at stages).
          bool fromPrototype = placed.empty() || !fusing;
          if (failed(placeAutoStages(*planned->module, placed,
                                     plan.pipelineAxis)) ||
              failed(planModule(*planned, *machine, limit, plan, source,
                                fromPrototype ? &mapping : nullptr,
                                pruneAbove))) {
            if (plan.prunedBound) {
              prunedBounds.push_back(*plan.prunedBound);
              continue;
            }
            if (!autoAxisSteps.empty() || plan.microbatches)
              continue;
            if (i == 0)
              return signalPassFailure();
            continue;
          }
        }
        plan.planned = planned;
        for (func::FuncOp step : autoScheduled(*planned->module))
          planned->autoSchedule.push_back(step.getSymName().str());
        const Footprint &footprint = planned->footprint;
        // The planner prices a pipelined step whole, as one device would run
        // it; its schedule takes a share of that.
        double share = plan.pipelineAxis ? pipelineShare(*planned) : 1.0;
        int64_t lastStage =
            planned->open.empty() || !dataAxisOf(plan.roles) ? 0 : 3;
        for (int64_t stage = 0; stage <= lastStage; ++stage) {
          Candidate variant = plan;
          variant.zero = stage;
          // With no stage open, the stage a step was given is estimated.
          int64_t applied = planned->open.empty() ? planned->givenZero : stage;
          variant.estimatedSeconds =
              (plan.plannedSeconds + footprint.extraSeconds(applied)) * share;
          variant.estimatedBytes = footprint.bytes(applied);
          // A stage that divides nothing more (the plan already splits what
          // ZeRO would) is not another plan.
          if (stage > 0 && variant.estimatedBytes == footprint.bytes(stage - 1))
            continue;
          // The same plan twice (a restriction the free plan met anyway, or
          // plans whose arguments split alike): the faster stays.
          std::string name = variant.name(mesh);
          auto same = llvm::find_if(considered, [&](const Candidate &c) {
            return c.name(mesh) == name;
          });
          if (same == considered.end())
            considered.push_back(variant);
          else if (variant.estimatedSeconds < same->estimatedSeconds)
            *same = variant;
        }
      }

      if (considered.empty()) {
        module.emitError() << "--auto-shard: the stages of @"
                           << autoAxisSteps.front()
                           << " (axis=auto) could not be placed on any mesh "
                              "axis, or no plan around them could be made";
        return signalPassFailure();
      }
      llvm::stable_sort(considered, better);
      // Checked first: the best stage of each planned module (the plans
      // differ most between modules), then the other stages.
      SmallVector<Candidate *> order;
      llvm::SmallPtrSet<PlannedModule *, 8> first;
      for (Candidate &candidate : considered)
        if (candidate.fits(limit) &&
            first.insert(candidate.planned.get()).second)
          order.push_back(&candidate);
      size_t firstOfModules = order.size();
      for (Candidate &candidate : considered)
        if (!llvm::is_contained(order, &candidate))
          order.push_back(&candidate);
      // Where in `order` the first plan checked to fit was.
      std::optional<size_t> firstFit;
      for (auto [position, candidate] : llvm::enumerate(order)) {
        // Enough plans checked: only one estimated faster than the best
        // checked may still win.
        if (fitting >= kExactChecks &&
            !(bestCheckedEstimate &&
              candidate->estimatedSeconds < *bestCheckedEstimate))
          continue;
        // Another ZeRO stage of a module with a plan checked to fit, and
        // no faster by its estimate: the stages of one module differ only
        // by what the estimate models (the stage's collectives), so it is
        // not a contender either.
        if (auto it = moduleFits.find(candidate->planned.get());
            it != moduleFits.end() && candidate->estimatedSeconds >= it->second)
          continue;
        // Far slower by its estimate than a plan checked to fit: not a
        // contender.
        if (bestCheckedEstimate &&
            candidate->estimatedSeconds > kCheckMargin * *bestCheckedEstimate)
          continue;
        auto it = unmodelled.find(candidate->planned.get());
        if (it != unmodelled.end() &&
            candidate->estimatedBytes + it->second > limit)
          candidate->estimatedBytes += it->second;
        if (!candidate->fits(limit)) {
          skipped.push_back(candidate);
          continue;
        }
        checkOne(*candidate);
        if (fitting > 0 && !firstFit)
          firstFit = position;
      }
      if (prunedBounds.empty())
        break;
      // A pruned plan would have been checked unless, at its turn, a plan
      // checked to fit made it far slower: its best stage comes among the
      // first of each module after every one estimated under its bound,
      // so a plan must have been checked to fit before those, and its
      // bound must be over kCheckMargin times every estimate checked to
      // fit (bestCheckedEstimate takes these).
      double mostFitting = 0;
      for (const Candidate &candidate : considered)
        if (candidate.exact && candidate.exact->arenaBytes <= limit)
          mostFitting = std::max(mostFitting, candidate.estimatedSeconds);
      auto neverChecked = [&](double bound) {
        size_t before = 0;
        while (before < firstOfModules &&
               order[before]->estimatedSeconds < bound)
          ++before;
        return firstFit && *firstFit < before &&
               bound > kCheckMargin * mostFitting;
      };
      if (llvm::all_of(prunedBounds, neverChecked)) {
        pruned = int(prunedBounds.size());
        break;
      }
      unpruned = int(prunedBounds.size());
    }
    // Nothing checked fits: the estimates may be wrong too.
    for (Candidate *candidate : skipped)
      if (fitting == 0)
        checkOne(*candidate);
    // Megatron's sequence parallelism: the best checked plan that splits
    // weights over a tensor axis (and does not pipeline), and the best of
    // those that split weights over that axis alone, are checked again
    // with the residual stream also split over the sequence on that axis;
    // each variant competes by its checked figures.
    // The same weight splits completed by propagation, as a hand plan is,
    // are checked for the same plans (with sequence=off too).
    std::optional<OpenStep> streamStep = openPipelineStep(module);
    if (streamStep) {
      SmallVector<Candidate *> tensorPlans;
      for (Candidate &candidate : considered)
        if (candidate.exact && !candidate.pipelineAxis &&
            !candidate.microbatches &&
            candidate.planned->autoSchedule.empty() &&
            tensorAxisOf(candidate.roles, *machine))
          tensorPlans.push_back(&candidate);
      llvm::stable_sort(tensorPlans,
                        [&](const Candidate *a, const Candidate *b) {
                          bool fa = a->exact->arenaBytes <= limit,
                               fb = b->exact->arenaBytes <= limit;
                          if (fa != fb)
                            return fa;
                          return a->exact->stepSeconds < b->exact->stepSeconds;
                        });
      auto megatronShaped = [](const Candidate *c) {
        return llvm::count_if(c->roles, [](const std::string &role) {
                 return StringRef(role).contains("tensor");
               }) == 1;
      };
      SmallVector<Candidate *, 2> bases;
      if (!tensorPlans.empty())
        bases.push_back(tensorPlans.front());
      if (auto it = llvm::find_if(tensorPlans, megatronShaped);
          it != tensorPlans.end() && !llvm::is_contained(bases, *it))
        bases.push_back(*it);
      // Checked apart and added after: `tensorPlans` points into
      // `considered`.
      std::vector<Candidate> variants;
      auto checkVariant = [&](const Candidate &base,
                              OwningOpRef<ModuleOp> module2, int32_t axis) {
        if (!module2)
          return;
        auto planned = std::make_shared<PlannedModule>();
        planned->module = std::move(module2);
        planned->footprint = base.planned->footprint;
        for (auto [func, before] : base.planned->open)
          if (auto copy = planned->module->lookupSymbol<func::FuncOp>(
                  func.getSymName()))
            planned->open.push_back({copy, before});
        Candidate variant = base;
        variant.planned = planned;
        variant.sequenceAxis = axis;
        variant.propagated = axis < 0;
        variant.checked = false;
        variant.exact.reset();
        variant.error.clear();
        variant.remat.reset();
        variant.scheduleTrials.clear();
        variant.schedulesSkipped.clear();
        checkOne(variant);
        if (variant.exact)
          variants.push_back(std::move(variant));
      };
      for (Candidate *base : ArrayRef(bases).take_front(kSequenceChecks)) {
        int32_t axis = *tensorAxisOf(base->roles, *machine);
        StringRef axisName =
            cast<StringAttr>(mesh.getAxisNames()[axis]).getValue();
        if (sequence == "auto")
          checkVariant(*base,
                       sequenceParallelVariant(module, *base->planned->module,
                                               streamStep->name, axisName),
                       axis);
        // The same weight splits completed by propagation, as a hand
        // plan is: the planner completes the other values itself, and
        // where its completion is the slower (it may split the updates of
        // whole weights and gather them) this is the plan to check.
        checkVariant(
            *base,
            propagatedVariant(module, *base->planned->module, streamStep->name),
            -1);
      }
      for (Candidate &variant : variants)
        considered.push_back(std::move(variant));
    }
    // Rematerialization, where no step has a mode yet (a mode the user
    // gave is kept): a plan checked to be over the limit may fit when
    // layers recompute (--par-remat=auto with the limit as its budget). It
    // is then ranked by its checked time with the recomputation, which
    // only adds time, so plans already slower than the best that fits are
    // not tried.
    if (rematOpen) {
      SmallVector<Candidate *> over;
      for (Candidate &candidate : considered)
        if (candidate.exact && candidate.exact->arenaBytes > limit)
          over.push_back(&candidate);
      llvm::stable_sort(over, [](const Candidate *a, const Candidate *b) {
        return a->exact->stepSeconds < b->exact->stepSeconds;
      });
      int tries = 0;
      // A plan whose checked program is one already tried (ZeRO-2 and -3
      // partition alike when every parameter is split over the data axis
      // anyway) recomputes as that one did: it takes that trial's outcome
      // instead of repeating it.
      std::vector<std::pair<llvm::hash_code, const Candidate *>> tried;
      for (Candidate *candidate : over) {
        // Three trials, or as many as it takes while nothing fits: a plan
        // further down may recompute into the limit where the fastest
        // three cannot.
        if ((tries >= kExactChecks && fitting > 0) ||
            (bestChecked && candidate->exact->stepSeconds >= *bestChecked))
          break;
        ++tries;
        llvm::hash_code program = candidate->exact->program;
        auto same = llvm::find_if(
            tried, [&](const auto &entry) { return entry.first == program; });
        bool fits;
        if (same != tried.end()) {
          fits = same->second->remat.has_value();
          if (fits) {
            candidate->exact = same->second->exact;
            candidate->remat = same->second->remat;
          } else {
            candidate->rematSmallest = same->second->rematSmallest;
          }
        } else {
          fits = tryRemat(*candidate, *machine, limit);
          tried.push_back({program, candidate});
        }
        if (fits) {
          ++fitting;
          bestChecked =
              std::min(bestChecked.value_or(candidate->exact->stepSeconds),
                       candidate->exact->stepSeconds);
        }
      }
    }
    // Checked plans are ranked by their exact figures, ahead of the
    // estimates of the others.
    auto rank = [&] {
      llvm::stable_sort(considered,
                        [&](const Candidate &a, const Candidate &b) {
                          if (a.checked != b.checked)
                            return a.checked;
                          return better(a, b);
                        });
    };
    rank();
    // The plan chosen is the best by the whole module's figures: the first
    // is checked whole where its figures were read off shortened copies,
    // and so is any plan whose shortened figures come within
    // kShortenedMargin of the first's time (they may be off by that much),
    // the plans ranked again each time.
    int shortened = 0;
    for (const Candidate &candidate : considered)
      shortened += candidate.exact && candidate.exact->shortenedLayers;
    auto nextWhole = [&]() -> Candidate * {
      Candidate &first = considered.front();
      if (!first.exact)
        return nullptr;
      if (first.exact->shortenedLayers)
        return &first;
      for (Candidate &candidate : considered)
        if (candidate.exact && candidate.exact->shortenedLayers &&
            candidate.fits(limit) &&
            candidate.exact->stepSeconds <=
                first.exact->stepSeconds * (1 + kShortenedMargin))
          return &candidate;
      return nullptr;
    };
    while (Candidate *candidate = nextWhole()) {
      checkWhole(*candidate, *machine);
      rank();
    }
    const Candidate &best = considered.front();
    if (!best.exact) {
      module.emitError() << "--auto-shard: the plan does not partition: "
                         << best.error;
      return signalPassFailure();
    }
    if (!best.fits(limit)) {
      // The smallest need of any checked plan, with recomputation where it
      // was tried.
      const Candidate *smallest = nullptr;
      auto need = [](const Candidate &c) {
        return std::min(c.exact->arenaBytes,
                        c.rematSmallest.value_or(c.exact->arenaBytes));
      };
      for (const Candidate &candidate : considered)
        if (candidate.exact && (!smallest || need(candidate) < need(*smallest)))
          smallest = &candidate;
      module.emitError() << "--auto-shard: no plan fits in " << limit
                         << " bytes per device: the smallest found needs "
                         << need(*smallest) << " bytes ("
                         << smallest->name(mesh)
                         << (smallest->rematSmallest &&
                                     *smallest->rematSmallest <
                                         smallest->exact->arenaBytes
                                 ? " with recomputation"
                                 : "")
                         << "; the fastest considered: " << best.name(mesh)
                         << ", on " << machine->numDevices() << " devices"
                         << (rematOpen ? ", recomputation tried" : "")
                         << "); give more devices, a larger memory=, "
                         << (rematGiven ? "--par-remat=auto, " : "")
                         << "or a lower precision";
      return signalPassFailure();
    }

    // The winner's planned module becomes the module.
    setStage(best);
    module.getBodyRegion().takeBody(best.planned->module->getBodyRegion());
    mesh = *module.getOps<MeshOp>().begin();
    for (auto &planner : best.planned->planners)
      planner->writeRecords();
    // The recomputation the plan was checked with.
    if (best.remat)
      for (auto func : module.getOps<func::FuncOp>()) {
        auto it = best.remat->find(func.getSymName().str());
        if (it != best.remat->end() &&
            failed(applyRemat(func, it->second.modes, "auto", limit,
                              it->second.peak)))
          return signalPassFailure();
      }

    MLIRContext *ctx = module.getContext();
    Builder b(ctx);
    // The alternatives keep the names the axes had when they were planned.
    SmallVector<Attribute> alternatives;
    for (const Candidate &other :
         ArrayRef(considered).drop_front().take_front(5)) {
      std::string reason;
      llvm::raw_string_ostream os(reason);
      StringRef estimate = other.checked ? "" : " (the planner's estimate)";
      // An unchecked plan's estimate against the chosen plan's estimate.
      double versus = other.checked ? best.seconds() : best.estimatedSeconds;
      // Figures read off shortened copies of the step.
      std::string shortenedNote;
      if (other.exact && other.exact->shortenedLayers)
        shortenedNote =
            std::string(other.exact->pipeline
                            ? " (checked on 1 and 2 layers a stage of its "
                            : " (checked on 3 and 4 of its ") +
            std::to_string(other.exact->shortenedLayers) + " layers)";
      if (other.checked && !other.exact)
        os << "does not partition: " << other.error;
      else if (!other.fits(limit))
        os << "needs " << other.bytes() << " bytes per device, over the limit"
           << (other.checked ? StringRef(shortenedNote) : estimate);
      else if (other.seconds() < versus)
        os << "not checked: the planner's estimate ranks it below the "
           << checks << " plans checked";
      else if (!other.checked && other.seconds() == versus)
        os << "not checked: estimated as fast as the chosen plan, which "
              "was checked first";
      else
        os << llvm::format("slower by %.1f%%",
                           100 * (other.seconds() / versus - 1))
           << (other.checked ? shortenedNote
                             : " (the planner's estimates of both plans)");
      SmallVector<NamedAttribute> entry = {
          b.getNamedAttr("plan", b.getStringAttr(other.name(mesh))),
          b.getNamedAttr("step_seconds", b.getF64FloatAttr(other.seconds())),
          b.getNamedAttr("memory_bytes", b.getI64IntegerAttr(other.bytes())),
          b.getNamedAttr("checked", b.getBoolAttr(other.checked)),
          b.getNamedAttr("reason", b.getStringAttr(reason)),
          // What the search estimated, next to what the check measured.
          b.getNamedAttr("estimated_seconds",
                         b.getF64FloatAttr(other.estimatedSeconds)),
          b.getNamedAttr("estimated_bytes",
                         b.getI64IntegerAttr(other.estimatedBytes))};
      alternatives.push_back(b.getDictionaryAttr(entry));
    }
    nameAxesByRole(mesh, best.roles);
    SmallVector<NamedAttribute> axes;
    for (auto [a, role] : llvm::enumerate(best.roles))
      axes.push_back(
          b.getNamedAttr(cast<StringAttr>(mesh.getAxisNames()[a]).getValue(),
                         b.getStringAttr(role)));
    // The profile as a later --report can find it: a preset's name, or the
    // file's absolute path.
    std::string profile = machine->profile().name;
    if (!hardware.empty() && llvm::sys::fs::exists(hardware)) {
      SmallString<256> path(hardware);
      llvm::sys::fs::make_absolute(path);
      profile = path.str().str();
    }
    SmallVector<NamedAttribute> record = {
        b.getNamedAttr("hardware", b.getStringAttr(profile)),
        b.getNamedAttr("profile", b.getStringAttr(machine->profile().name)),
        b.getNamedAttr("memory_limit", b.getI64IntegerAttr(limit)),
        b.getNamedAttr("plan", b.getStringAttr(best.name(mesh))),
        b.getNamedAttr("axes", b.getDictionaryAttr(axes)),
        b.getNamedAttr("zero",
                       b.getI64IntegerAttr(
                           best.zero ? best.zero : best.planned->givenZero)),
        b.getNamedAttr("remat", b.getStringAttr(best.remat   ? "auto"
                                                : rematGiven ? "given"
                                                             : "none")),
        b.getNamedAttr("planned_seconds",
                       b.getF64FloatAttr(best.plannedSeconds)),
        // The search's estimate of the plan: the integer program's, with
        // what ZeRO adds, and for a pipeline one stage's share with its
        // bubble (the program prices the whole step on each stage).
        b.getNamedAttr("estimated_seconds",
                       b.getF64FloatAttr(best.estimatedSeconds)),
        b.getNamedAttr("step_seconds",
                       b.getF64FloatAttr(best.exact->stepSeconds)),
        b.getNamedAttr("memory_bytes",
                       b.getI64IntegerAttr(best.exact->arenaBytes)),
        b.getNamedAttr("estimated_bytes",
                       b.getI64IntegerAttr(best.estimatedBytes)),
        b.getNamedAttr("considered", b.getI64IntegerAttr(considered.size())),
        b.getNamedAttr("pruned", b.getI64IntegerAttr(pruned)),
        b.getNamedAttr("unpruned", b.getI64IntegerAttr(unpruned)),
        b.getNamedAttr("checked", b.getI64IntegerAttr(checks)),
        b.getNamedAttr("shortened_checks", b.getI64IntegerAttr(shortened)),
        b.getNamedAttr("whole_checks_shared",
                       b.getI64IntegerAttr(wholeChecksShared)),
        b.getNamedAttr("alternatives", b.getArrayAttr(alternatives)),
    };
    // Planned and checked as --par-fuse will run it.
    if (fusing)
      record.push_back(b.getNamedAttr("fused", b.getUnitAttr()));
    if (!best.schedule.empty()) {
      record.push_back(
          b.getNamedAttr("schedule", b.getStringAttr(best.schedule)));
      SmallVector<Attribute> trials;
      for (auto &[name, seconds, bytes] : best.scheduleTrials)
        trials.push_back(b.getDictionaryAttr(
            {b.getNamedAttr("schedule", b.getStringAttr(name)),
             b.getNamedAttr("step_seconds", b.getF64FloatAttr(seconds)),
             b.getNamedAttr("memory_bytes", b.getI64IntegerAttr(bytes))}));
      // Not checked: only the search's estimate.
      for (auto &[name, seconds] : best.schedulesSkipped)
        trials.push_back(b.getDictionaryAttr(
            {b.getNamedAttr("schedule", b.getStringAttr(name)),
             b.getNamedAttr("estimated_seconds", b.getF64FloatAttr(seconds))}));
      record.push_back(
          b.getNamedAttr("schedules", b.getArrayAttr(trials)));
    }
    module->setAttr(ParDialect::kAutoShardAttrName,
                    b.getDictionaryAttr(record));
  }
};

} // namespace
