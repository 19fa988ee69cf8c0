//===- ShardingGraph.h - the factor graph of a sharded module ---*- C++ -*-===//
//
// The public factor graph behind --par-propagate, --par-explain-sharding and
// --par-insert-reshards (Partition/ReshardPlacement.cpp), and what a planner
// builds on. It sees the module as a graph: nodes are tensors (function
// arguments, op results and function results), edges are ops with a
// sharding rule (plus identity edges from each returned value to its
// function result). Each edge step projects its tensors' dim shardings onto
// the rule's factors, picks one axis list per factor (conflicts settled by
// a ConflictStrategy), and projects back. Shardings only ever grow (axes
// are appended to open dims), so the fixed point is reached in a bounded
// number of steps. docs/propagation.md states the rules.
//
//===----------------------------------------------------------------------===//
#ifndef PAR_TRANSFORMS_SHARDINGGRAPH_H
#define PAR_TRANSFORMS_SHARDINGGRAPH_H

#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Transforms/Propagation.h"
#include "par/Transforms/ReshardPlan.h"

#include "mlir/IR/AsmState.h"
#include "llvm/ADT/DenseMap.h"

#include <limits>
#include <optional>

namespace mlir::par::propagation {

/// Mesh axes as indices into their mesh's axis list, major to minor.
using AxisList = SmallVector<uint8_t, 4>;
/// Set of mesh axes of one mesh (meshes have at most 64 axes).
using AxisMask = uint64_t;

/// Dims visible in every stage (inferred axes, unannotated dims).
constexpr int64_t kAlwaysVisible = std::numeric_limits<int64_t>::min();
/// Priority of annotated dims that carry axes but no `pN`: the last stage.
constexpr int64_t kUnprioritized = std::numeric_limits<int64_t>::max();

/// How an axis came to be on a tensor: given by the user (edge < 0), or
/// copied by `edge` from the tensor `source`.
struct AxisOrigin {
  int32_t edge = -1;
  int32_t source = -1;
  /// The user priority in force when the axis was set: its own for an
  /// annotation, the stage's for an inferred axis. Lower wins conflicts.
  int64_t priority = kUnprioritized;
  bool isUser() const { return edge < 0; }
};

struct DimState {
  AxisList axes;
  SmallVector<AxisOrigin, 2> origins; // one per axis
  bool open = true;
  /// The stage priority from which the dim takes part in propagation.
  int64_t priority = kAlwaysVisible;
  /// The priority as written by the user, kept on output.
  std::optional<int64_t> userPriority;
};

struct Node {
  Value value;             // null for a function result
  Operation *func;         // the function the tensor belongs to
  int32_t funcResult = -1; // result index when `value` is null
  RankedTensorType type;
  Location loc;
  int32_t mesh = -1;
  bool user = false; // carried an annotation
  /// A parameter argument of its function, or a parameter's gradient,
  /// working copy or view (the result of an op marked par.gradient_of,
  /// par.copy_of or par.view_of): ranks before activations in conflicts.
  bool parameter = false;
  SmallVector<DimState, 4> dims;
  AxisList replicated;
  AxisList partial;
  SmallVector<AxisOrigin, 2> partialOrigins;
  int64_t bytes = 0;
  unsigned numUses = 0;
  SmallVector<int32_t, 4> edges;
};

/// One op (or function-result identity) seen through its sharding rule.
struct Edge {
  Operation *op;
  bool isReturn = false;
  SmallVector<Factor> factors;
  /// Per slot (operands, then results): dims to factor ids.
  SmallVector<TensorFactors, 4> mappings;
  /// Per slot: the node, or -1 for a value that is not a ranked tensor.
  SmallVector<int32_t, 4> slots;
  unsigned numOperands = 0;
  /// 0: shape-preserving pass-through ops, 1: the rest.
  int level = 1;
  /// Some factor is held by results but by no operand (broadcast): forward
  /// propagation waits for the last op level.
  bool expanding = false;
  /// A mixed-mesh edge is skipped (reported once).
  bool mixedMesh = false;
};

/// A propagation stage: user priority, then op level.
struct Stage {
  int64_t priority;
  int level;
};

constexpr int kNumLevels = 3;

/// One tensor's axes for a factor (a candidate), or the axes an op chose
/// for it (with the slot they were taken from).
struct FactorChoice {
  int32_t slot = -1;
  AxisList axes;
  /// The weakest priority among the axes (see AxisOrigin::priority).
  int64_t priority = kUnprioritized;
};

/// What a conflict strategy knows of one candidate split of a factor.
struct CandidateFacts {
  /// The weakest user priority among its axes (lower is stronger).
  int64_t priority;
  /// Bytes of the tensor it comes from, and the shards its axes make.
  int64_t bytes, shards;
  /// The operand/result slot of the op it comes from.
  int32_t slot;
  /// Whether that tensor is a parameter (a function argument that persists
  /// from step to step, StepArguments.h) or a parameter's gradient, working
  /// copy or view.
  bool parameter = false;
};

/// How propagation settles a conflict between incompatible splits of one
/// factor, and in which order factors claim mesh axes (as Shardy's
/// propagation strategies): a strategy orders candidates and names the
/// rule that decided. Swapping the strategy changes the policy, not the
/// engine.
class ConflictStrategy {
public:
  virtual ~ConflictStrategy();
  /// Whether `a` beats `b`.
  virtual bool better(const CandidateFacts &a,
                      const CandidateFacts &b) const = 0;
  /// The rule that made `win` beat `lose`, for --par-explain-sharding.
  virtual std::string reason(const CandidateFacts &win,
                             const CandidateFacts &lose) const = 0;
};

/// par's documented order (docs/propagation.md): earlier user priority,
/// then a parameter before an activation, then the larger tensor, then more
/// shards, then the lower operand index.
const ConflictStrategy &defaultConflictStrategy();

struct Conflict {
  int64_t factor;
  /// The competing candidates.
  SmallVector<FactorChoice, 2> candidates;
  /// The slot whose axes were kept; -1 when the factor lost an axis to
  /// another factor of the op.
  int32_t winner;
  std::string reason;
};

/// Axes of a tensor dim that no factor of the op can take.
struct Leftover {
  int32_t slot;
  int64_t dim;
  AxisList axes;
};

struct EdgeEval {
  int32_t mesh = -1;
  SmallVector<FactorChoice, 8> choices;
  SmallVector<Conflict, 1> conflicts;
  SmallVector<Leftover, 1> leftovers;
};

/// An operand move that an assignment of mesh axes to an op's factors
/// implies (ShardingGraph::impliedReshards): from the operand's current
/// layout to the one the op would compute with. Axes index the op's mesh.
struct ImpliedReshard {
  unsigned operand;
  ReshardLayout from, to;
};

class ShardingGraph {
public:
  explicit ShardingGraph(ModuleOp module, const ConflictStrategy &strategy =
                                              defaultConflictStrategy());

  /// Builds the graph from the module's functions and annotations.
  void build();
  /// Runs every stage to its fixed point.
  void run();
  /// Writes a sharding on every tensor that has a mesh.
  void writeBack();
  /// Warnings for user shardings an op drops entirely, remarks for axes an
  /// op cannot carry (non-dividing reshapes, head splits). Reads the state
  /// reached by run().
  void emitDiagnostics();
  /// Human-readable report: every tensor's sharding with where each axis
  /// came from, then every conflict and how it was resolved.
  void explain(llvm::raw_ostream &os);

  /// Inserts the reshards that make every op's tensors agree with the
  /// factor shardings chosen for it (see par::insertReshards).
  int64_t insertReshards();

  /// The operand reshards that splitting the factors of `op`'s rule over
  /// `factorAxes` (one list of mesh axis indices per factor, major first)
  /// would imply, from the graph's current state and without changing the
  /// IR: what a planner prices (planReshard, reshardCost) before it
  /// decides. Fails when `op` has no rule edge, no mesh, or the lists do
  /// not match its factors.
  FailureOr<SmallVector<ImpliedReshard, 2>>
  impliedReshards(Operation *op,
                  ArrayRef<SmallVector<int32_t>> factorAxes) const;
  /// The mesh axis sizes of the mesh `op`'s tensors are on (empty if none).
  SmallVector<int64_t> meshAxisSizes(Operation *op) const;

private:
  /// Clears the factor splits that some tensor of the edge cannot express.
  void keepRepresentable(const Edge &edge, EdgeEval &eval) const;

  // Graph construction.
  int32_t addNode(Value value, Operation *func, int32_t funcResult,
                  RankedTensorType type, Location loc, ShardingAttr sharding);
  void addRuleEdge(Operation *op, const ShardingRule &rule);
  void addReturnEdge(Operation *ret, Value returned, int32_t resultNode);
  int32_t meshIndex(FlatSymbolRefAttr name);

  // Propagation.
  bool visible(const DimState &dim, const Stage &stage) const {
    return dim.priority <= stage.priority;
  }
  /// Fills `eval` for `edge` under `stage`; false if the edge is skipped.
  bool evaluate(Edge &edge, const Stage &stage, EdgeEval &eval, bool report);
  /// What the conflict strategy sees of candidate `choice` of `edge`.
  CandidateFacts factsOf(int32_t mesh, const Edge &edge,
                         const FactorChoice &choice) const;
  /// Applies `eval` to the edge's tensors; true if any changed.
  bool apply(int32_t edgeId, const Stage &stage, const EdgeEval &eval);
  bool edgeActive(const Edge &edge, const Stage &stage) const;
  void runStage(const Stage &stage);

  // Projections.
  void projectDim(const DimState &dim, ArrayRef<int64_t> dimFactors,
                  ArrayRef<Factor> factors, int32_t mesh,
                  MutableArrayRef<AxisList> out, AxisList &leftover) const;
  /// The axes a tensor dim holding `dimFactors` gets from `choices`, with
  /// the slot each axis came from.
  /// `dropped` (optional) receives the axes of split factors the dim cannot
  /// hold because a more major factor of it is not fully split.
  void backProjectDim(ArrayRef<int64_t> dimFactors, ArrayRef<Factor> factors,
                      ArrayRef<FactorChoice> choices, int32_t mesh,
                      AxisList &axes, SmallVectorImpl<int32_t> &fromSlots,
                      AxisList *dropped = nullptr) const;
  int64_t shardCount(int32_t mesh, ArrayRef<uint8_t> axes) const;
  AxisMask usedAxes(const Node &node) const;

  // Reporting helpers.
  std::string axesText(int32_t mesh, ArrayRef<uint8_t> axes) const;
  std::string nodeName(int32_t node);
  std::string opText(Operation *op) const;
  std::string slotName(const Edge &edge, int32_t slot);
  /// `factor k (dim 1 of operand 0 %3)`: the factor where it first appears.
  std::string factorText(const Edge &edge, int64_t factor);
  std::string shardingText(const Node &node) const;
  std::string originChain(int32_t node, uint8_t axis);
  /// The mesh axis names of `axes`.
  SmallVector<StringAttr> axisAttrs(int32_t mesh, ArrayRef<uint8_t> axes) const;
  ShardingAttr toAttr(const Node &node) const;
  /// A sharding with closed dims and no priority.
  ShardingAttr makeAttr(int32_t mesh, ArrayRef<AxisList> dims,
                        ArrayRef<uint8_t> partial) const;
  std::string dropReason(const Edge &edge, const EdgeEval &eval, int32_t slot,
                         int64_t dim);
  /// Final-state evaluation of every edge, computed once; with `report`,
  /// with the records reports name (conflicts and their reasons).
  void evaluateFinal(bool report = true);

  ModuleOp module;
  MLIRContext *ctx;
  const ConflictStrategy &strategy;
  SmallVector<MeshOp> meshes;
  SmallVector<FlatSymbolRefAttr> meshRefs;
  SmallVector<SmallVector<StringAttr>> axisNames;
  SmallVector<SmallVector<int64_t>> axisSizes;
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  llvm::DenseMap<Value, int32_t> valueNodes;
  SmallVector<Stage> stages;
  std::vector<uint8_t> dirty;
  std::vector<EdgeEval> finalEvals;
  /// Whether finalEvals carry the report records.
  bool finalReported = false;
  std::optional<AsmState> asmState;
};

} // namespace mlir::par::propagation

#endif // PAR_TRANSFORMS_SHARDINGGRAPH_H
