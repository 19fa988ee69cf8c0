//===- OpCatalogue.h - generated from ParOps.td: do not edit --*- C++ -*-===//
//
// The runtime-facing op catalogue, written by scripts/gen-catalogue.py from
// the ODS op definitions (every build regenerates it; the test suite fails
// when this committed copy is stale). Plain C++: par-run includes it without
// MLIR, and the program emitter writes attributes from the same schema.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CATALOGUE_OPCATALOGUE_H
#define PAR_CATALOGUE_OPCATALOGUE_H

#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

namespace par::catalogue {

/// One opcode per op that programs may hold, in ParOps.td order.
enum class OpCode : int {
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  Neg,
  Exp,
  Log,
  Tanh,
  Sqrt,
  Rsqrt,
  Gelu,
  Silu,
  Relu,
  Sigmoid,
  Compare,
  Select,
  Convert,
  Constant,
  Broadcast,
  Reduce,
  Transpose,
  Reshape,
  Slice,
  Concat,
  Pad,
  Dot,
  Softmax,
  LogSoftmax,
  Argmax,
  Argmin,
  LayerNorm,
  RmsNorm,
  Attention,
  AttentionGradQ,
  AttentionGradKv,
  Embedding,
  ScatterAdd,
  Gather,
  CrossEntropy,
  Rope,
  Adamw,
  Sgd,
  Fused,
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  AllSlice,
  CollectivePermute,
  Exchange,
  AxisIndex,
  Send,
  Recv,
};
inline constexpr int kNumOps = 55;

enum class CollectiveKind : int {
  Sum = 0,
  Max = 1,
  Min = 2,
};
inline constexpr const char *kCollectiveKindCases[] = {"sum", "max", "min"};

enum class CompareDirection : int {
  Eq = 0,
  Ne = 1,
  Lt = 2,
  Le = 3,
  Gt = 4,
  Ge = 5,
};
inline constexpr const char *kCompareDirectionCases[] = {"eq", "ne", "lt", "le", "gt", "ge"};

enum class ReduceKind : int {
  Sum = 0,
  Max = 1,
  Min = 2,
  Mean = 3,
};
inline constexpr const char *kReduceKindCases[] = {"sum", "max", "min", "mean"};

/// How an attribute is written in a program file (docs/program-format.md).
enum class AttrKind : int {
  Int,      // integer
  Ints,     // list of integers
  Float,    // number
  Bool,     // true or false
  Enum,     // one of the spellings in `cases`
  Group,    // index into the program's communicator groups
  Pairs,    // list of [source, target] group members
  Elements, // "splat": number, or "values": list of numbers
  Body,     // list of steps: the ops of a fused group
};

struct AttrSpec {
  const char *key; // program-file key
  const char *ods; // the ODS attribute it is written from
  AttrKind kind;
  bool optional;   // may be absent, no default
  bool hasDefault; // absent means `defaultValue` (Int/Float/Bool)
  double defaultValue;
  const char *const *cases; // Enum: spellings by value
  int numCases;
  bool finite; // Float: inf and nan are refused
  bool required() const { return !optional && !hasDefault; }
};

struct OpSpec {
  OpCode code;
  const char *name; // program-file and MLIR mnemonic
  int minOperands;
  int maxOperands; // -1: variadic
  int minResults;
  int maxResults; // more than minResults: optional results
  bool pairedOptionals; // optional results present iff optional operands are
  bool inPlace;      // may write a result over a same-sized operand
  bool collective;   // runs over a communicator group
  bool communicates; // exchanges data between devices
  bool usesGroup;    // reads its communicator group (collectives, axis_index)
  int trafficMoved;  // collectives: elements moved per call, in buffers
  bool ringTraffic;  // collectives: a rank sends (n-1)/n of what is moved
  int flopsPerElement; // compute ops: FLOPs per element of the largest tensor
  bool elementwise;  // element i of the result reads element i of each operand
  const AttrSpec *attrs;
  int numAttrs;
};

inline constexpr AttrSpec kCompareAttrs[] = {
    {"direction", "direction", AttrKind::Enum, false, false, 0.0, kCompareDirectionCases, 6, false},
};
inline constexpr AttrSpec kConstantAttrs[] = {
    {"value", "value", AttrKind::Elements, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kBroadcastAttrs[] = {
    {"dims", "dims", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kReduceAttrs[] = {
    {"kind", "kind", AttrKind::Enum, false, false, 0.0, kReduceKindCases, 4, false},
    {"dims", "dims", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kTransposeAttrs[] = {
    {"perm", "perm", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kSliceAttrs[] = {
    {"starts", "starts", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
    {"limits", "limits", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
    {"strides", "strides", AttrKind::Ints, true, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kConcatAttrs[] = {
    {"dim", "dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kPadAttrs[] = {
    {"low", "low", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
    {"high", "high", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
    {"interior", "interior", AttrKind::Ints, true, false, 0.0, nullptr, 0, false},
    {"fill", "fill", AttrKind::Float, false, true, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kDotAttrs[] = {
    {"lhs_batch", "lhs_batch", AttrKind::Ints, true, false, 0.0, nullptr, 0, false},
    {"rhs_batch", "rhs_batch", AttrKind::Ints, true, false, 0.0, nullptr, 0, false},
    {"lhs_contract", "lhs_contract", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
    {"rhs_contract", "rhs_contract", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kSoftmaxAttrs[] = {
    {"dim", "dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kLogSoftmaxAttrs[] = {
    {"dim", "dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kArgmaxAttrs[] = {
    {"dim", "dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kArgminAttrs[] = {
    {"dim", "dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kLayerNormAttrs[] = {
    {"epsilon", "epsilon", AttrKind::Float, false, true, 9.999999747378752e-06, nullptr, 0, true},
};
inline constexpr AttrSpec kRmsNormAttrs[] = {
    {"epsilon", "epsilon", AttrKind::Float, false, true, 9.999999974752427e-07, nullptr, 0, true},
};
inline constexpr AttrSpec kAttentionAttrs[] = {
    {"causal", "causal", AttrKind::Bool, false, true, 0.0, nullptr, 0, false},
    {"scale", "scale", AttrKind::Float, true, false, 0.0, nullptr, 0, true},
    {"position_offset", "position_offset", AttrKind::Int, false, true, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kAttentionGradQAttrs[] = {
    {"causal", "causal", AttrKind::Bool, false, true, 0.0, nullptr, 0, false},
    {"scale", "scale", AttrKind::Float, true, false, 0.0, nullptr, 0, true},
    {"position_offset", "position_offset", AttrKind::Int, false, true, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kAttentionGradKvAttrs[] = {
    {"causal", "causal", AttrKind::Bool, false, true, 0.0, nullptr, 0, false},
    {"scale", "scale", AttrKind::Float, true, false, 0.0, nullptr, 0, true},
    {"position_offset", "position_offset", AttrKind::Int, false, true, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kScatterAddAttrs[] = {
    {"dims", "dims", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kGatherAttrs[] = {
    {"dims", "dims", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kRopeAttrs[] = {
    {"theta", "theta", AttrKind::Float, false, true, 10000.0, nullptr, 0, true},
    {"position_offset", "position_offset", AttrKind::Int, false, true, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kAdamwAttrs[] = {
    {"beta1", "beta1", AttrKind::Float, false, true, 0.8999999761581421, nullptr, 0, true},
    {"beta2", "beta2", AttrKind::Float, false, true, 0.9990000128746033, nullptr, 0, true},
    {"epsilon", "epsilon", AttrKind::Float, false, true, 9.99999993922529e-09, nullptr, 0, true},
    {"weight_decay", "weight_decay", AttrKind::Float, false, true, 0.009999999776482582, nullptr, 0, true},
};
inline constexpr AttrSpec kSgdAttrs[] = {
    {"momentum", "momentum", AttrKind::Float, false, true, 0.0, nullptr, 0, true},
    {"weight_decay", "weight_decay", AttrKind::Float, false, true, 0.0, nullptr, 0, true},
    {"nesterov", "nesterov", AttrKind::Bool, false, true, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kFusedAttrs[] = {
    {"body", "body", AttrKind::Body, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kAllReduceAttrs[] = {
    {"kind", "kind", AttrKind::Enum, false, false, 0.0, kCollectiveKindCases, 3, false},
    {"group", "axes", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kAllGatherAttrs[] = {
    {"group", "axes", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
    {"dim", "dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kReduceScatterAttrs[] = {
    {"kind", "kind", AttrKind::Enum, false, false, 0.0, kCollectiveKindCases, 3, false},
    {"group", "axes", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
    {"dim", "dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kAllToAllAttrs[] = {
    {"group", "axes", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
    {"split_dim", "split_dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
    {"concat_dim", "concat_dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kAllSliceAttrs[] = {
    {"group", "axes", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
    {"dim", "dim", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kCollectivePermuteAttrs[] = {
    {"group", "axes", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
    {"pairs", "pairs", AttrKind::Pairs, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kExchangeAttrs[] = {
    {"group", "axes", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
    {"source", "source", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
    {"target", "target", AttrKind::Ints, false, false, 0.0, nullptr, 0, false},
    {"offsets", "offsets", AttrKind::Ints, true, false, 0.0, nullptr, 0, false},
    {"strides", "strides", AttrKind::Ints, true, false, 0.0, nullptr, 0, false},
    {"source_sizes", "source_sizes", AttrKind::Ints, true, false, 0.0, nullptr, 0, false},
    {"result_sizes", "result_sizes", AttrKind::Ints, true, false, 0.0, nullptr, 0, false},
    {"fill", "fill", AttrKind::Float, false, true, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kAxisIndexAttrs[] = {
    {"group", "axes", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kSendAttrs[] = {
    {"group", "axis", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
    {"to", "to", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
    {"channel", "channel", AttrKind::Int, false, true, 0.0, nullptr, 0, false},
};
inline constexpr AttrSpec kRecvAttrs[] = {
    {"group", "axis", AttrKind::Group, false, false, 0.0, nullptr, 0, false},
    {"from", "from", AttrKind::Int, false, false, 0.0, nullptr, 0, false},
    {"channel", "channel", AttrKind::Int, false, true, 0.0, nullptr, 0, false},
};

inline constexpr OpSpec kOps[kNumOps] = {
    {OpCode::Add, "add", 2, 2, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Sub, "sub", 2, 2, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Mul, "mul", 2, 2, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Div, "div", 2, 2, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Max, "max", 2, 2, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Min, "min", 2, 2, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Neg, "neg", 1, 1, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Exp, "exp", 1, 1, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Log, "log", 1, 1, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Tanh, "tanh", 1, 1, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Sqrt, "sqrt", 1, 1, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Rsqrt, "rsqrt", 1, 1, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Gelu, "gelu", 1, 1, 1, 1, false, true, false, false, false, 0, false, 8, true, nullptr, 0},
    {OpCode::Silu, "silu", 1, 1, 1, 1, false, true, false, false, false, 0, false, 4, true, nullptr, 0},
    {OpCode::Relu, "relu", 1, 1, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Sigmoid, "sigmoid", 1, 1, 1, 1, false, true, false, false, false, 0, false, 4, true, nullptr, 0},
    {OpCode::Compare, "compare", 2, 2, 1, 1, false, false, false, false, false, 0, false, 1, true, kCompareAttrs, 1},
    {OpCode::Select, "select", 3, 3, 1, 1, false, true, false, false, false, 0, false, 1, true, nullptr, 0},
    {OpCode::Convert, "convert", 1, 1, 1, 1, false, false, false, false, false, 0, false, 0, true, nullptr, 0},
    {OpCode::Constant, "constant", 0, 0, 1, 1, false, false, false, false, false, 0, false, 0, false, kConstantAttrs, 1},
    {OpCode::Broadcast, "broadcast", 1, 1, 1, 1, false, false, false, false, false, 0, false, 0, false, kBroadcastAttrs, 1},
    {OpCode::Reduce, "reduce", 1, 1, 1, 1, false, false, false, false, false, 0, false, 1, false, kReduceAttrs, 2},
    {OpCode::Transpose, "transpose", 1, 1, 1, 1, false, false, false, false, false, 0, false, 0, false, kTransposeAttrs, 1},
    {OpCode::Reshape, "reshape", 1, 1, 1, 1, false, false, false, false, false, 0, false, 0, false, nullptr, 0},
    {OpCode::Slice, "slice", 1, 1, 1, 1, false, false, false, false, false, 0, false, 0, false, kSliceAttrs, 3},
    {OpCode::Concat, "concat", 1, -1, 1, 1, false, false, false, false, false, 0, false, 0, false, kConcatAttrs, 1},
    {OpCode::Pad, "pad", 1, 1, 1, 1, false, false, false, false, false, 0, false, 0, false, kPadAttrs, 4},
    {OpCode::Dot, "dot", 2, 2, 1, 1, false, false, false, false, false, 0, false, 2, false, kDotAttrs, 4},
    {OpCode::Softmax, "softmax", 1, 1, 1, 1, false, false, false, false, false, 0, false, 5, false, kSoftmaxAttrs, 1},
    {OpCode::LogSoftmax, "log_softmax", 1, 1, 1, 1, false, false, false, false, false, 0, false, 5, false, kLogSoftmaxAttrs, 1},
    {OpCode::Argmax, "argmax", 1, 1, 1, 1, false, false, false, false, false, 0, false, 1, false, kArgmaxAttrs, 1},
    {OpCode::Argmin, "argmin", 1, 1, 1, 1, false, false, false, false, false, 0, false, 1, false, kArgminAttrs, 1},
    {OpCode::LayerNorm, "layer_norm", 3, 3, 1, 1, false, false, false, false, false, 0, false, 8, false, kLayerNormAttrs, 1},
    {OpCode::RmsNorm, "rms_norm", 2, 2, 1, 1, false, false, false, false, false, 0, false, 5, false, kRmsNormAttrs, 1},
    {OpCode::Attention, "attention", 3, 4, 1, 2, false, false, false, false, false, 0, false, 2, false, kAttentionAttrs, 3},
    {OpCode::AttentionGradQ, "attention_grad_q", 6, 7, 1, 1, false, false, false, false, false, 0, false, 2, false, kAttentionGradQAttrs, 3},
    {OpCode::AttentionGradKv, "attention_grad_kv", 6, 7, 2, 2, false, false, false, false, false, 0, false, 2, false, kAttentionGradKvAttrs, 3},
    {OpCode::Embedding, "embedding", 2, 2, 1, 1, false, false, false, false, false, 0, false, 0, false, nullptr, 0},
    {OpCode::ScatterAdd, "scatter_add", 3, 3, 1, 1, false, false, false, false, false, 0, false, 1, false, kScatterAddAttrs, 1},
    {OpCode::Gather, "gather", 2, 2, 1, 1, false, false, false, false, false, 0, false, 0, false, kGatherAttrs, 1},
    {OpCode::CrossEntropy, "cross_entropy", 2, 2, 1, 1, false, false, false, false, false, 0, false, 5, false, nullptr, 0},
    {OpCode::Rope, "rope", 1, 2, 1, 1, false, false, false, false, false, 0, false, 6, false, kRopeAttrs, 2},
    {OpCode::Adamw, "adamw", 6, 6, 3, 3, false, true, false, false, false, 0, false, 16, false, kAdamwAttrs, 4},
    {OpCode::Sgd, "sgd", 3, 4, 1, 2, true, true, false, false, false, 0, false, 4, false, kSgdAttrs, 3},
    {OpCode::Fused, "fused", 1, -1, 1, 2, false, true, false, false, false, 0, false, 0, false, kFusedAttrs, 1},
    {OpCode::AllReduce, "all_reduce", 1, 1, 1, 1, false, false, true, true, true, 2, true, 0, false, kAllReduceAttrs, 2},
    {OpCode::AllGather, "all_gather", 1, 1, 1, 1, false, false, true, true, true, 1, true, 0, false, kAllGatherAttrs, 2},
    {OpCode::ReduceScatter, "reduce_scatter", 1, 1, 1, 1, false, false, true, true, true, 1, true, 0, false, kReduceScatterAttrs, 3},
    {OpCode::AllToAll, "all_to_all", 1, 1, 1, 1, false, false, true, true, true, 1, true, 0, false, kAllToAllAttrs, 3},
    {OpCode::AllSlice, "all_slice", 1, 1, 1, 1, false, false, true, false, true, 0, true, 0, false, kAllSliceAttrs, 2},
    {OpCode::CollectivePermute, "collective_permute", 1, 1, 1, 1, false, false, true, true, true, 1, false, 0, false, kCollectivePermuteAttrs, 2},
    {OpCode::Exchange, "exchange", 1, -1, 1, 1, false, false, true, true, true, 1, false, 0, false, kExchangeAttrs, 8},
    {OpCode::AxisIndex, "axis_index", 0, 0, 1, 1, false, false, false, false, true, 0, false, 0, false, kAxisIndexAttrs, 1},
    {OpCode::Send, "send", 1, 1, 0, 0, false, false, false, false, true, 0, false, 0, false, kSendAttrs, 3},
    {OpCode::Recv, "recv", 0, 0, 1, 1, false, false, false, false, true, 0, false, 0, false, kRecvAttrs, 3},
};

inline const OpSpec &spec(OpCode op) { return kOps[int(op)]; }
inline const char *opName(OpCode op) { return spec(op).name; }
/// The traffic of one call of collective `op` on one rank of a group of
/// `n`, in multiples of its larger buffer: elements moved (an all-reduce
/// twice its buffer, as ZeRO counts) and bytes sent by ring algorithms.
/// `moves` is false when the call's attributes move nothing (a permute
/// whose pairs all stay); a ring over one device moves nothing. The one
/// formula of the compiler's cost model and par-run's counters.
struct Traffic {
  double moved = 0, share = 0;
};
inline Traffic collectiveTraffic(const OpSpec &op, int64_t n, bool moves = true) {
  if (!op.collective || !moves || (op.ringTraffic && n <= 1))
    return {};
  double moved = op.trafficMoved;
  return {moved, op.ringTraffic ? moved * double(n - 1) / double(n) : moved};
}

/// The op named `name`, or nullptr.
inline const OpSpec *findOp(const char *name) {
  for (const OpSpec &op : kOps)
    if (std::strcmp(op.name, name) == 0)
      return &op;
  return nullptr;
}

/// Every op's attributes, decoded once when a program is loaded; an op
/// uses the fields its AttrSpecs name (absent ones keep their defaults).
struct FusedStep;
struct Attrs {
  double beta1 = 0;
  double beta2 = 0;
  std::vector<FusedStep> body;
  bool causal = false;
  int64_t channel = 0;
  CollectiveKind collectiveKind = CollectiveKind::Sum;
  CompareDirection compareDirection = CompareDirection::Eq;
  int64_t concatDim = 0;
  int64_t dim = 0;
  std::vector<int64_t> dims;
  double epsilon = 0;
  double fill = 0;
  int64_t from = 0;
  int64_t group = -1;
  std::vector<int64_t> high;
  std::vector<int64_t> interior;
  std::vector<int64_t> lhsBatch;
  std::vector<int64_t> lhsContract;
  std::vector<int64_t> limits;
  std::vector<int64_t> low;
  double momentum = 0;
  bool nesterov = false;
  std::vector<int64_t> offsets;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  std::vector<int64_t> perm;
  int64_t positionOffset = 0;
  ReduceKind reduceKind = ReduceKind::Sum;
  std::vector<int64_t> resultSizes;
  std::vector<int64_t> rhsBatch;
  std::vector<int64_t> rhsContract;
  std::optional<double> scale;
  std::vector<int64_t> source;
  std::vector<int64_t> sourceSizes;
  int64_t splitDim = 0;
  std::vector<int64_t> starts;
  std::vector<int64_t> strides;
  std::vector<int64_t> target;
  double theta = 0;
  int64_t to = 0;
  std::vector<double> value;
  double weightDecay = 0;
};

/// One op of a fused group's body (par.fused): the values it reads (the
/// group's operands are values 0..n-1, step j makes value n + j), the
/// element type it makes (a par::rt::DType) and its own attributes. A
/// reduce, which may end a body, also names the shape it reads (the
/// shape every other step of the group computes).
struct FusedStep {
  OpCode op = OpCode::Add;
  std::vector<int64_t> args;
  int dtype = 0;
  Attrs attrs;
  std::vector<int64_t> shape;
};

/// Decodes the attributes of `op` into `a` through `d`, which reads one
/// attribute of each kind: d.integer, d.integers, d.number, d.optionalNumber,
/// d.boolean, d.enumeration, d.group, d.pairs, d.elements, d.body (each given the
/// AttrSpec and the field; a reader fills defaults and rejects what is
/// missing or malformed).
template <typename Decoder>
void decodeAttrs(OpCode op, Decoder &d, Attrs &a) {
  switch (op) {
  case OpCode::Compare:
    d.enumeration(kCompareAttrs[0], a.compareDirection);
    return;
  case OpCode::Constant:
    d.elements(kConstantAttrs[0], a.value);
    return;
  case OpCode::Broadcast:
    d.integers(kBroadcastAttrs[0], a.dims);
    return;
  case OpCode::Reduce:
    d.enumeration(kReduceAttrs[0], a.reduceKind);
    d.integers(kReduceAttrs[1], a.dims);
    return;
  case OpCode::Transpose:
    d.integers(kTransposeAttrs[0], a.perm);
    return;
  case OpCode::Slice:
    d.integers(kSliceAttrs[0], a.starts);
    d.integers(kSliceAttrs[1], a.limits);
    d.integers(kSliceAttrs[2], a.strides);
    return;
  case OpCode::Concat:
    d.integer(kConcatAttrs[0], a.dim);
    return;
  case OpCode::Pad:
    d.integers(kPadAttrs[0], a.low);
    d.integers(kPadAttrs[1], a.high);
    d.integers(kPadAttrs[2], a.interior);
    d.number(kPadAttrs[3], a.fill);
    return;
  case OpCode::Dot:
    d.integers(kDotAttrs[0], a.lhsBatch);
    d.integers(kDotAttrs[1], a.rhsBatch);
    d.integers(kDotAttrs[2], a.lhsContract);
    d.integers(kDotAttrs[3], a.rhsContract);
    return;
  case OpCode::Softmax:
    d.integer(kSoftmaxAttrs[0], a.dim);
    return;
  case OpCode::LogSoftmax:
    d.integer(kLogSoftmaxAttrs[0], a.dim);
    return;
  case OpCode::Argmax:
    d.integer(kArgmaxAttrs[0], a.dim);
    return;
  case OpCode::Argmin:
    d.integer(kArgminAttrs[0], a.dim);
    return;
  case OpCode::LayerNorm:
    d.number(kLayerNormAttrs[0], a.epsilon);
    return;
  case OpCode::RmsNorm:
    d.number(kRmsNormAttrs[0], a.epsilon);
    return;
  case OpCode::Attention:
    d.boolean(kAttentionAttrs[0], a.causal);
    d.optionalNumber(kAttentionAttrs[1], a.scale);
    d.integer(kAttentionAttrs[2], a.positionOffset);
    return;
  case OpCode::AttentionGradQ:
    d.boolean(kAttentionGradQAttrs[0], a.causal);
    d.optionalNumber(kAttentionGradQAttrs[1], a.scale);
    d.integer(kAttentionGradQAttrs[2], a.positionOffset);
    return;
  case OpCode::AttentionGradKv:
    d.boolean(kAttentionGradKvAttrs[0], a.causal);
    d.optionalNumber(kAttentionGradKvAttrs[1], a.scale);
    d.integer(kAttentionGradKvAttrs[2], a.positionOffset);
    return;
  case OpCode::ScatterAdd:
    d.integers(kScatterAddAttrs[0], a.dims);
    return;
  case OpCode::Gather:
    d.integers(kGatherAttrs[0], a.dims);
    return;
  case OpCode::Rope:
    d.number(kRopeAttrs[0], a.theta);
    d.integer(kRopeAttrs[1], a.positionOffset);
    return;
  case OpCode::Adamw:
    d.number(kAdamwAttrs[0], a.beta1);
    d.number(kAdamwAttrs[1], a.beta2);
    d.number(kAdamwAttrs[2], a.epsilon);
    d.number(kAdamwAttrs[3], a.weightDecay);
    return;
  case OpCode::Sgd:
    d.number(kSgdAttrs[0], a.momentum);
    d.number(kSgdAttrs[1], a.weightDecay);
    d.boolean(kSgdAttrs[2], a.nesterov);
    return;
  case OpCode::Fused:
    d.body(kFusedAttrs[0], a.body);
    return;
  case OpCode::AllReduce:
    d.enumeration(kAllReduceAttrs[0], a.collectiveKind);
    d.group(kAllReduceAttrs[1], a.group);
    return;
  case OpCode::AllGather:
    d.group(kAllGatherAttrs[0], a.group);
    d.integer(kAllGatherAttrs[1], a.dim);
    return;
  case OpCode::ReduceScatter:
    d.enumeration(kReduceScatterAttrs[0], a.collectiveKind);
    d.group(kReduceScatterAttrs[1], a.group);
    d.integer(kReduceScatterAttrs[2], a.dim);
    return;
  case OpCode::AllToAll:
    d.group(kAllToAllAttrs[0], a.group);
    d.integer(kAllToAllAttrs[1], a.splitDim);
    d.integer(kAllToAllAttrs[2], a.concatDim);
    return;
  case OpCode::AllSlice:
    d.group(kAllSliceAttrs[0], a.group);
    d.integer(kAllSliceAttrs[1], a.dim);
    return;
  case OpCode::CollectivePermute:
    d.group(kCollectivePermuteAttrs[0], a.group);
    d.pairs(kCollectivePermuteAttrs[1], a.pairs);
    return;
  case OpCode::Exchange:
    d.group(kExchangeAttrs[0], a.group);
    d.integers(kExchangeAttrs[1], a.source);
    d.integers(kExchangeAttrs[2], a.target);
    d.integers(kExchangeAttrs[3], a.offsets);
    d.integers(kExchangeAttrs[4], a.strides);
    d.integers(kExchangeAttrs[5], a.sourceSizes);
    d.integers(kExchangeAttrs[6], a.resultSizes);
    d.number(kExchangeAttrs[7], a.fill);
    return;
  case OpCode::AxisIndex:
    d.group(kAxisIndexAttrs[0], a.group);
    return;
  case OpCode::Send:
    d.group(kSendAttrs[0], a.group);
    d.integer(kSendAttrs[1], a.to);
    d.integer(kSendAttrs[2], a.channel);
    return;
  case OpCode::Recv:
    d.group(kRecvAttrs[0], a.group);
    d.integer(kRecvAttrs[1], a.from);
    d.integer(kRecvAttrs[2], a.channel);
    return;
  default:
    return;
  }
}

} // namespace par::catalogue

#endif // PAR_CATALOGUE_OPCATALOGUE_H
