//===- ParCosts.cpp - what ops cost and how partial sums travel ----------===//
//
// The traffic each collective states (CollectiveOpInterface) and the one
// cost computed from it; how each linear op carries partial sums
// (LinearOpInterface).
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ExchangeGeometry.h"
#include "par/Catalogue/OpCatalogue.h"
#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::par;

int64_t mlir::par::elementBytes(Type type) {
  // Costs only: types the runtime cannot store are rejected where programs
  // are planned, but every tensor type the dialect accepts has a size here.
  if (auto complex = dyn_cast<ComplexType>(type))
    return 2 * elementBytes(complex.getElementType());
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.getNumElements() * elementBytes(vector.getElementType());
  if (type.isIntOrFloat())
    return (type.getIntOrFloatBitWidth() + 7) / 8;
  return 8; // index and others: a machine word
}

int64_t mlir::par::bytesOf(llvm::ArrayRef<int64_t> shape, Type elementType) {
  // Saturates: a cost past int64 is as good as infinite.
  int64_t count = elementBytes(elementType);
  if (llvm::is_contained(shape, 0))
    return 0;
  for (int64_t size : shape) {
    if (size < 0 || count > INT64_MAX / size)
      return INT64_MAX;
    count *= size;
  }
  return count;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

/// The catalogue's entry of an op (generated from the same ODS).
static const ::par::catalogue::OpSpec &catalogueSpec(Operation *op) {
  const ::par::catalogue::OpSpec *spec =
      ::par::catalogue::findOp(op->getName().stripDialect().str().c_str());
  assert(spec && "an op missing from the generated catalogue");
  return *spec;
}

static double elementsOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() ? double(type.getNumElements()) : 0.0;
}

OpWork mlir::par::elementWork(Operation *op) {
  // Ops the catalogue does not list never run (sharding constraints and
  // reshards become collectives or nothing): no work.
  const ::par::catalogue::OpSpec *spec =
      ::par::catalogue::findOp(op->getName().stripDialect().str().c_str());
  if (!spec)
    return {};
  double largest = 0;
  for (Value operand : op->getOperands())
    largest = std::max(largest, elementsOf(operand));
  for (Value result : op->getResults())
    largest = std::max(largest, elementsOf(result));
  return {spec->flopsPerElement * largest, false};
}

double mlir::par::totalFlops(Operation *root) {
  double flops = 0;
  root->walk(
      [&](ShardingRuleOpInterface op) { flops += op.getWork().flops; });
  return flops;
}

double FusedOp::getFlops(Operation *except) {
  double flops = 0;
  for (Operation &member : getBodyOps())
    if (auto rule = dyn_cast<ShardingRuleOpInterface>(member))
      if (&member != except)
        flops += rule.getWork().flops;
  return flops;
}

OpWork DotOp::getWork() {
  // One point per combination of batch, free and contracted indices: the
  // product of the rule's factor sizes.
  double points = 1;
  ShardingRule rule = getShardingRule();
  for (const Factor &factor : rule.getFactors())
    points *= double(factor.size);
  return {catalogueSpec(getOperation()).flopsPerElement * points, true};
}

/// Attention-shaped work: q [B, S, H, D] against k [B, T, Hkv, D] gives
/// B x H x S x T score points; each product over them costs the op's
/// FLOPs per point times its depth (D for the scores and dS k, dS^T q;
/// Dv for P v, dO v^T and P^T dO).
static OpWork attentionWork(Operation *op, Value q, Value v,
                            int64_t headDimProducts, int64_t valueProducts) {
  ArrayRef<int64_t> qs = cast<RankedTensorType>(q.getType()).getShape(),
                    vs = cast<RankedTensorType>(v.getType()).getShape();
  double rows = double(qs[0]) * double(qs[2]) * double(qs[1]) * double(vs[1]);
  double perElement = catalogueSpec(op).flopsPerElement;
  return {perElement * rows *
              double(headDimProducts * qs[3] + valueProducts * vs[3]),
          true};
}

OpWork AttentionOp::getWork() {
  // The scores, then the weights times v.
  return attentionWork(getOperation(), getQ(), getV(), 1, 1);
}

OpWork AttentionGradQOp::getWork() {
  // The scores again, dP = dO v^T, dQ = dS k.
  return attentionWork(getOperation(), getQ(), getV(), 2, 1);
}

OpWork AttentionGradKvOp::getWork() {
  // The scores again, dP = dO v^T, dV = P^T dO, dK = dS^T q.
  return attentionWork(getOperation(), getQ(), getV(), 2, 2);
}

bool SliceOp::readsResultWorth(unsigned index) { return index == 0; }

bool GatherOp::readsResultWorth(unsigned index) {
  // The indices are read whole; of the operand, the slices they pick.
  return index == 0;
}

bool EmbeddingOp::readsResultWorth(unsigned index) {
  // The ids are read whole; of the table, a row per id.
  return index == 0;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//


bool CollectiveOpInterface::communicates() {
  return catalogueSpec(getOperation()).communicates;
}

CollectiveCost CollectiveOpInterface::getCost() {
  CollectiveCost cost;
  llvm::raw_string_ostream axes(cost.axes);
  axes << "[";
  llvm::interleave(getAxes().getAsValueRange<StringAttr>(), axes, ",");
  axes << "]";
  cost.group = getGroupSize();
  CollectiveTraffic traffic = getTraffic(cost.group);
  cost.name = traffic.name;
  ::par::catalogue::Traffic share = ::par::catalogue::collectiveTraffic(
      catalogueSpec(getOperation()), cost.group, traffic.moves);
  double moved = share.moved;
  auto type = cast<RankedTensorType>(traffic.buffer.getType());
  cost.elements = type.getNumElements();
  cost.bytes = bytesOf(type.getShape(), type.getElementType());
  cost.volume = int64_t(moved * traffic.fraction * double(cost.elements) + 0.5);
  cost.sent = (int64_t)(share.share * traffic.fraction * cost.bytes + 0.5);
  cost.moves = traffic.moves;
  return cost;
}

CollectiveTraffic AllReduceOp::getTraffic(int64_t) {
  return {("all_reduce " + stringifyCollectiveKind(getKind())).str(),
          getInput()};
}

CollectiveTraffic AllGatherOp::getTraffic(int64_t) {
  return {"all_gather", getResult()};
}

CollectiveTraffic ReduceScatterOp::getTraffic(int64_t) {
  return {("reduce_scatter " + stringifyCollectiveKind(getKind())).str(),
          getInput()};
}

CollectiveTraffic AllToAllOp::getTraffic(int64_t) {
  return {"all_to_all", getInput()};
}

CollectiveTraffic CollectivePermuteOp::getTraffic(int64_t) {
  // Moves its buffer when some member sends to another.
  ArrayRef<int64_t> pairs = getPairs();
  bool moves = false;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2)
    moves |= pairs[i] != pairs[i + 1];
  return {"collective_permute", getInput(), moves};
}

CollectiveTraffic ExchangeOp::getTraffic(int64_t) {
  // The busiest member's elements out of the largest buffer.
  Value buffer = getResult();
  for (Value input : getInputs())
    if (cast<RankedTensorType>(input.getType()).getNumElements() >
        cast<RankedTensorType>(buffer.getType()).getNumElements())
      buffer = input;
  std::string error;
  FailureOr<::par::exchange::Geometry> g = getExchangeGeometry(*this, error);
  int64_t elements = cast<RankedTensorType>(buffer.getType()).getNumElements();
  int64_t moved = succeeded(g) ? exchangeTraffic(*g) : 0;
  CollectiveTraffic traffic{"exchange", buffer, moved > 0};
  traffic.fraction = elements ? double(moved) / double(elements) : 0.0;
  return traffic;
}

CollectiveTraffic AllSliceOp::getTraffic(int64_t) {
  return {"all_slice", getInput()};
}

//===----------------------------------------------------------------------===//
// Linear ops
//===----------------------------------------------------------------------===//

Linearity AddOp::getLinearity(unsigned) { return Linearity::All; }
Linearity SubOp::getLinearity(unsigned) { return Linearity::All; }

Linearity DivOp::getLinearity(unsigned operand) {
  return operand == 0 ? Linearity::Each : Linearity::None;
}

Linearity PadOp::getLinearity(unsigned) {
  // Padding with zeros adds zeros: the partial sums' pads sum to the pad.
  return getFill().isZero() ? Linearity::Each : Linearity::None;
}

Linearity ReduceOp::getLinearity(unsigned) {
  return getKind() == ReduceKind::sum || getKind() == ReduceKind::mean
             ? Linearity::Each
             : Linearity::None;
}

Linearity ConvertOp::getLinearity(unsigned) {
  // Partial sums rounded to a narrower float before they are added lose
  // precision (bf16 all-reduces): only conversions that keep every bit
  // carry partials.
  auto from = dyn_cast<FloatType>(getElementTypeOrSelf(getInput()));
  auto to = dyn_cast<FloatType>(getElementTypeOrSelf(getResult()));
  return from && to && to.getWidth() >= from.getWidth() &&
                 to.getFPMantissaWidth() >= from.getFPMantissaWidth()
             ? Linearity::Each
             : Linearity::None;
}
