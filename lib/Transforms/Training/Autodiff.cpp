//===- Autodiff.cpp - --par-autodiff: training steps from forward losses --===//
//
// Reverse-mode differentiation on the global program. Each op's gradient
// rule is written in ops of the catalogue, so the backward pass carries
// sharding rules, propagates, partitions and runs like the forward pass.
// The optimizer update follows, with its states as new parameters that the
// step replaces (par.updates).
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Dialect/Par/IR/ParConstants.h"
#include "par/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <numeric>

namespace mlir::par {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct OptimizerConfig {
  std::string kind; // none | sgd | adamw
  double lr, momentum, weightDecay, beta1, beta2, epsilon;
  double clip;
  int64_t warmup, decaySteps;
  double minLrRatio;
  std::string precision; // fp32 | bf16 | fp16
  double lossScale;
  int64_t scaleWindow;
  int64_t zero;
  std::string dataAxis;
};

/// The learning rate at step t (1-based): linear warm-up, then a cosine to
/// minLrRatio lr at decaySteps, constant after.
static double scheduledLr(const OptimizerConfig &c, int64_t t) {
  if (c.warmup > 0 && t <= c.warmup)
    return c.lr * double(t) / double(c.warmup);
  if (c.decaySteps <= c.warmup)
    return c.lr;
  double progress = std::min(1.0, double(t - c.warmup) /
                                      double(c.decaySteps - c.warmup));
  return c.lr * (c.minLrRatio +
                 (1 - c.minLrRatio) * 0.5 * (1 + std::cos(M_PI * progress)));
}

class Differentiator {
public:
  Differentiator(func::FuncOp func, const OptimizerConfig &config)
      : func(func), config(config), b(func.getContext()) {
    b.setListener(&stamper);
  }
  LogicalResult run();

private:
  using Rule = LogicalResult (Differentiator::*)(Operation *, Value);

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  static bool isFloat(Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && isa<FloatType>(type.getElementType());
  }
  Value splat(RankedTensorType type, double value) {
    return splatConstant(b, loc, type, value);
  }
  Value splatLike(Value like, double value) { return splat(typeOf(like), value); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, typeOf(x), x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, typeOf(x), x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, typeOf(x), x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, typeOf(x), x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, typeOf(x), x); }
  Value scale(Value x, double factor) { return mul(x, splatLike(x, factor)); }
  Value select(Value pred, Value onTrue, Value onFalse) {
    return SelectOp::create(b, loc, typeOf(onTrue), pred, onTrue, onFalse);
  }
  Value compare(CompareDirection direction, Value x, Value y) {
    return CompareOp::create(b, loc, getI1TensorLike(x.getType()),
                             CompareDirectionAttr::get(b.getContext(), direction),
                             x, y);
  }
  /// Broadcast of `x` to `type`, `x`'s dims going to `dims`.
  Value broadcast(Value x, RankedTensorType type, ArrayRef<int64_t> dims) {
    return BroadcastOp::create(b, loc, type, x, b.getDenseI64ArrayAttr(dims));
  }
  /// Sum of `x` over `dims` (dims dropped).
  Value reduceSum(Value x, ArrayRef<int64_t> dims);
  /// Sum of every element of `x` (a 0-d tensor).
  Value sumAll(Value x) {
    SmallVector<int64_t> all(typeOf(x).getRank());
    std::iota(all.begin(), all.end(), 0);
    return reduceSum(x, all);
  }
  /// `x` with element type `element` (itself when it has it already).
  Value convertTo(Value x, Type element) {
    if (typeOf(x).getElementType() == element)
      return x;
    return ConvertOp::create(
        b, loc, RankedTensorType::get(typeOf(x).getShape(), element), x);
  }
  /// The dims of a rank-`rank` tensor not in `dims`, in order.
  static SmallVector<int64_t> complement(int64_t rank, ArrayRef<int64_t> dims);
  /// A float one-hot of integer `ids` over `classes` as a trailing dim.
  Value oneHot(Value ids, int64_t classes, Type elementType);

  void accumulate(Value value, Value grad);

  LogicalResult elementwise(Operation *op, Value g);
  LogicalResult backward(Operation *op, Value g);
  LogicalResult dotRule(DotOp op, Value g);
  LogicalResult layerNormRule(Operation *op, Value g);
  LogicalResult attentionRule(AttentionOp op, Value g);
  LogicalResult ropeRule(RopeOp op, Value g);
  LogicalResult scatterAddRule(ScatterAddOp op, Value g);
  Value dot(Value x, Value y, ArrayRef<int64_t> xb, ArrayRef<int64_t> yb,
            ArrayRef<int64_t> xc, ArrayRef<int64_t> yc,
            ArrayRef<int64_t> shape);
  Value transpose(Value x, ArrayRef<int64_t> perm);
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, typeOf(x).getElementType()), x);
  }

  func::FuncOp func;
  const OptimizerConfig &config;
  OpBuilder b;
  /// Marks every op the builder makes with the phase being built.
  PhaseStamper stamper;
  Location loc = UnknownLoc::get(func.getContext());
  DenseMap<Value, Value> adjoints;
  /// Values that depend on a parameter: the only ones that need gradients.
  DenseSet<Value> varied;
  /// Mixed precision: the low-precision copy of each fp32 argument.
  DenseMap<Value, Value> lowCopies;
  DenseSet<Operation *> copyOps;

  /// Mixed precision: computes the forward pass in `low`: every fp32
  /// argument is converted once at the top, every fp32 value becomes `low`,
  /// and the loss is converted back. Returns the fp32 loss.
  Value lowerPrecision(FloatType low, Value loss);
};
} // namespace


SmallVector<int64_t> Differentiator::complement(int64_t rank,
                                                ArrayRef<int64_t> dims) {
  SmallVector<int64_t> rest;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d))
      rest.push_back(d);
  return rest;
}

Value Differentiator::reduceSum(Value x, ArrayRef<int64_t> dims) {
  if (dims.empty())
    return x;
  RankedTensorType type = typeOf(x);
  SmallVector<int64_t> shape;
  for (int64_t d : complement(type.getRank(), dims))
    shape.push_back(type.getDimSize(d));
  return ReduceOp::create(b, loc,
                          RankedTensorType::get(shape, type.getElementType()),
                          ReduceKind::sum, x, b.getDenseI64ArrayAttr(dims));
}

Value Differentiator::oneHot(Value ids, int64_t classes, Type elementType) {
  RankedTensorType idsType = typeOf(ids);
  Type intType = idsType.getElementType();
  Value columns = iotaConstant(b, loc, classes, intType);
  SmallVector<int64_t> shape(idsType.getShape());
  shape.push_back(classes);
  auto wide = RankedTensorType::get(shape, intType);
  int64_t rank = idsType.getRank();
  SmallVector<int64_t> leading(rank);
  std::iota(leading.begin(), leading.end(), 0);
  Value hit = compare(CompareDirection::eq, broadcast(columns, wide, {rank}),
                      broadcast(ids, wide, leading));
  auto out = RankedTensorType::get(shape, elementType);
  return select(hit, splat(out, 1.0), splat(out, 0.0));
}

void Differentiator::accumulate(Value value, Value grad) {
  if (!isFloat(value) || !varied.contains(value))
    return;
  if (grad.getType() != value.getType())
    grad = ConvertOp::create(b, loc, value.getType(), grad);
  Value &slot = adjoints[value];
  slot = slot ? add(slot, grad) : grad;
}

/// Unary and binary element-wise ops: d/dx from the forward values.
LogicalResult Differentiator::elementwise(Operation *op, Value g) {
  Value y = op->getResult(0);
  Value x = op->getOperand(0);
  auto one = [&]() { return splatLike(x, 1.0); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](AddOp o) {
        accumulate(o.getLhs(), g);
        accumulate(o.getRhs(), g);
        return success();
      })
      .Case([&](SubOp o) {
        accumulate(o.getLhs(), g);
        accumulate(o.getRhs(), neg(g));
        return success();
      })
      .Case([&](MulOp o) {
        accumulate(o.getLhs(), mul(g, o.getRhs()));
        accumulate(o.getRhs(), mul(g, o.getLhs()));
        return success();
      })
      .Case([&](DivOp o) {
        accumulate(o.getLhs(), div(g, o.getRhs()));
        accumulate(o.getRhs(), neg(div(mul(g, y), o.getRhs())));
        return success();
      })
      .Case([&](MaxOp o) {
        Value lhsWins = compare(CompareDirection::ge, o.getLhs(), o.getRhs());
        Value zero = splatLike(g, 0.0);
        accumulate(o.getLhs(), select(lhsWins, g, zero));
        accumulate(o.getRhs(), select(lhsWins, zero, g));
        return success();
      })
      .Case([&](MinOp o) {
        Value lhsWins = compare(CompareDirection::le, o.getLhs(), o.getRhs());
        Value zero = splatLike(g, 0.0);
        accumulate(o.getLhs(), select(lhsWins, g, zero));
        accumulate(o.getRhs(), select(lhsWins, zero, g));
        return success();
      })
      .Case([&](NegOp) {
        accumulate(x, neg(g));
        return success();
      })
      .Case([&](ExpOp) {
        accumulate(x, mul(g, y));
        return success();
      })
      .Case([&](LogOp) {
        accumulate(x, div(g, x));
        return success();
      })
      .Case([&](TanhOp) {
        accumulate(x, mul(g, sub(one(), mul(y, y))));
        return success();
      })
      .Case([&](SqrtOp) {
        accumulate(x, div(scale(g, 0.5), y));
        return success();
      })
      .Case([&](RsqrtOp) {
        accumulate(x, mul(scale(g, -0.5), mul(y, mul(y, y))));
        return success();
      })
      .Case([&](SigmoidOp) {
        accumulate(x, mul(g, mul(y, sub(one(), y))));
        return success();
      })
      .Case([&](ReluOp) {
        Value positive = compare(CompareDirection::gt, x, splatLike(x, 0.0));
        accumulate(x, select(positive, g, splatLike(g, 0.0)));
        return success();
      })
      .Case([&](SiluOp) {
        // silu = x s(x); d = s (1 + x (1 - s)).
        Value s = SigmoidOp::create(b, loc, typeOf(x), x);
        accumulate(x, mul(g, mul(s, add(one(), mul(x, sub(one(), s))))));
        return success();
      })
      .Case([&](GeluOp) {
        // gelu = x/2 (1 + tanh(u)), u = k (x + c x^3):
        // d = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3c x^2).
        const double k = 0.7978845608028654, c = 0.044715;
        Value x2 = mul(x, x);
        Value u = scale(add(x, scale(mul(x2, x), c)), k);
        Value t = TanhOp::create(b, loc, typeOf(x), u);
        Value dt = scale(mul(sub(one(), mul(t, t)), add(one(), scale(x2, 3 * c))), k);
        Value d = scale(add(add(one(), t), mul(x, dt)), 0.5);
        accumulate(x, mul(g, d));
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}

/// Gradients of a general dot (result dims: batch, lhs free, rhs free) are
/// dots of the result gradient with the other operand, transposed back to
/// the operand's dim order.
LogicalResult Differentiator::dotRule(DotOp op, Value g) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  RankedTensorType lt = typeOf(lhs), rt = typeOf(rhs);
  ArrayRef<int64_t> lb = op.getLhsBatch() ? *op.getLhsBatch() : ArrayRef<int64_t>();
  ArrayRef<int64_t> rb = op.getRhsBatch() ? *op.getRhsBatch() : ArrayRef<int64_t>();
  ArrayRef<int64_t> lc = op.getLhsContract(), rc = op.getRhsContract();
  SmallVector<int64_t> lb_lc(lb), rb_rc(rb);
  lb_lc.append(lc.begin(), lc.end());
  rb_rc.append(rc.begin(), rc.end());
  SmallVector<int64_t> lf = complement(lt.getRank(), lb_lc);
  SmallVector<int64_t> rf = complement(rt.getRank(), rb_rc);
  int64_t nb = lb.size(), nl = lf.size(), nr = rf.size();
  auto range = [](int64_t from, int64_t count) {
    SmallVector<int64_t> r(count);
    std::iota(r.begin(), r.end(), from);
    return r;
  };
  SmallVector<int64_t> gBatch = range(0, nb), gLhsFree = range(nb, nl),
                       gRhsFree = range(nb + nl, nr);
  // Dot whose result dims map to `target`'s dims by `map`, then transposed.
  auto emit = [&](Value x, Value y, ArrayRef<int64_t> xb, ArrayRef<int64_t> yb,
                  ArrayRef<int64_t> xc, ArrayRef<int64_t> yc,
                  ArrayRef<int64_t> map, Value target) {
    RankedTensorType tt = typeOf(target);
    SmallVector<int64_t> shape;
    for (int64_t d : map)
      shape.push_back(tt.getDimSize(d));
    Value r = dot(x, y, xb, yb, xc, yc, shape);
    SmallVector<int64_t> perm(map.size());
    for (auto [i, d] : llvm::enumerate(map))
      perm[d] = i;
    if (!llvm::equal(perm, range(0, perm.size())))
      r = transpose(r, perm);
    accumulate(target, r);
  };
  auto isIdentity = [&](ArrayRef<int64_t> map) {
    return llvm::equal(map, range(0, map.size()));
  };
  // The contract dims of one operand in the other operand's dim order.
  auto matching = [](ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
    SmallVector<int64_t> sorted(from), out;
    llvm::sort(sorted);
    for (int64_t d : sorted)
      out.push_back(to[llvm::find(from, d) - from.begin()]);
    return out;
  };
  // Each gradient is a dot of g with the other operand in one of two
  // orders; the one whose result already has the operand's dim order needs
  // no transpose (a transpose would also resolve partial sums early).
  if (varied.contains(lhs)) {
    // g . rhs: batch, lhs free, rhs contract; rhs . g: batch, rhs
    // contract, lhs free.
    SmallVector<int64_t> first(lb), second(lb);
    first.append(lf);
    first.append(matching(rc, lc));
    second.append(matching(rc, lc));
    second.append(lf);
    if (!isIdentity(first) && isIdentity(second))
      emit(rhs, g, rb, gBatch, rf, gRhsFree, second, lhs);
    else
      emit(g, rhs, gBatch, rb, gRhsFree, rf, first, lhs);
  }
  if (varied.contains(rhs)) {
    // lhs . g: batch, lhs contract, rhs free; g . lhs: batch, rhs free,
    // lhs contract.
    SmallVector<int64_t> first(rb), second(rb);
    first.append(matching(lc, rc));
    first.append(rf);
    second.append(rf);
    second.append(matching(lc, rc));
    if (!isIdentity(first) && isIdentity(second))
      emit(g, lhs, gBatch, lb, gLhsFree, lf, second, rhs);
    else
      emit(lhs, g, lb, gBatch, lf, gLhsFree, first, rhs);
  }
  return success();
}

/// layer_norm / rms_norm over the last dim, from recomputed statistics:
/// with xhat = (x - mean) r (rms_norm: x r) and h = g gamma,
/// dx = r (h - mean(h) - xhat mean(h xhat)) (rms_norm: no mean(h) term),
/// dgamma = sum(g xhat), dbeta = sum(g) over the leading dims.
LogicalResult Differentiator::layerNormRule(Operation *op, Value g) {
  bool layer = isa<LayerNormOp>(op);
  Value x = op->getOperand(0), gamma = op->getOperand(1);
  double eps = layer ? cast<LayerNormOp>(op).getEpsilon().convertToDouble()
                     : cast<RmsNormOp>(op).getEpsilon().convertToDouble();
  RankedTensorType xt = typeOf(x);
  int64_t last = xt.getRank() - 1, n = xt.getDimSize(last);
  SmallVector<int64_t> leading = complement(xt.getRank(), {last});
  auto rowMean = [&](Value v) {
    return broadcast(scale(reduceSum(v, {last}), 1.0 / n), xt, leading);
  };
  Value centered = layer ? sub(x, rowMean(x)) : x;
  Value var = rowMean(mul(centered, centered));
  Value r = RsqrtOp::create(b, loc, xt, add(var, splat(xt, eps)));
  Value xhat = mul(centered, r);
  Value h = mul(g, broadcast(gamma, xt, {last}));
  Value inner = sub(h, mul(xhat, rowMean(mul(h, xhat))));
  if (layer)
    inner = sub(inner, rowMean(h));
  accumulate(x, mul(r, inner));
  accumulate(gamma, reduceSum(mul(g, xhat), leading));
  if (layer)
    accumulate(op->getOperand(2), reduceSum(g, leading));
  return success();
}

/// d operand = g; d updates = the slices of g the indices select: g with
/// the indexed dims flattened into rows, looked up (par.embedding) at each
/// entry's row-major row, -1 (zeros) for coordinates outside the operand.
LogicalResult Differentiator::scatterAddRule(ScatterAddOp op, Value g) {
  accumulate(op.getOperand(), g);
  Value updates = op.getUpdates();
  if (!isFloat(updates) || !varied.contains(updates))
    return success();
  RankedTensorType t = typeOf(g);
  ArrayRef<int64_t> dims = op.getDims();
  SmallVector<int64_t> rest = op.getSliceDims();
  SmallVector<int64_t> perm(dims);
  perm.append(rest);
  int64_t rows = 1, width = 1;
  for (int64_t d : dims)
    rows *= t.getDimSize(d);
  for (int64_t d : rest)
    width *= t.getDimSize(d);
  Value table = g;
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, t.getRank())))
    table = transpose(g, perm);
  table = reshape(table, {rows, width});

  Value indices = op.getIndices();
  RankedTensorType indexType = typeOf(indices);
  int64_t last = indexType.getRank() - 1;
  SmallVector<int64_t> entries(indexType.getShape().drop_back());
  auto entryType = RankedTensorType::get(entries, indexType.getElementType());
  Value row;
  SmallVector<Value> coordinates;
  for (auto [j, d] : llvm::enumerate(dims)) {
    SmallVector<int64_t> starts(indexType.getRank(), 0);
    SmallVector<int64_t> limits(indexType.getShape());
    starts[last] = j;
    limits[last] = j + 1;
    SmallVector<int64_t> one(entries);
    one.push_back(1);
    Value c = SliceOp::create(
        b, loc, RankedTensorType::get(one, indexType.getElementType()), indices,
        b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(limits),
        DenseI64ArrayAttr());
    c = reshape(c, entries);
    coordinates.push_back(c);
    row = row ? add(mul(row, splat(entryType, (double)t.getDimSize(d))), c) : c;
  }
  if (dims.size() > 1) {
    Value none = splat(entryType, -1.0);
    for (auto [j, d] : llvm::enumerate(dims)) {
      Value c = coordinates[j];
      row = select(compare(CompareDirection::lt, c, splat(entryType, 0.0)), none, row);
      row = select(compare(CompareDirection::ge, c,
                           splat(entryType, (double)t.getDimSize(d))),
                   none, row);
    }
  }
  SmallVector<int64_t> picked(entries);
  picked.push_back(width);
  Value slices = EmbeddingOp::create(
      b, loc, RankedTensorType::get(picked, t.getElementType()), table, row);
  accumulate(updates, reshape(slices, typeOf(updates).getShape()));
  return success();
}

Value Differentiator::dot(Value x, Value y, ArrayRef<int64_t> xb,
                          ArrayRef<int64_t> yb, ArrayRef<int64_t> xc,
                          ArrayRef<int64_t> yc, ArrayRef<int64_t> shape) {
  DenseI64ArrayAttr xbAttr, ybAttr;
  if (!xb.empty()) {
    xbAttr = b.getDenseI64ArrayAttr(xb);
    ybAttr = b.getDenseI64ArrayAttr(yb);
  }
  return DotOp::create(b, loc,
                       RankedTensorType::get(shape, typeOf(x).getElementType()),
                       x, y, xbAttr, ybAttr, b.getDenseI64ArrayAttr(xc),
                       b.getDenseI64ArrayAttr(yc));
}

Value Differentiator::transpose(Value x, ArrayRef<int64_t> perm) {
  RankedTensorType t = typeOf(x);
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  return TransposeOp::create(b, loc,
                             RankedTensorType::get(shape, t.getElementType()),
                             x, b.getDenseI64ArrayAttr(perm));
}

/// Attention, recomputed in catalogue ops with the query heads split as
/// [kv head, group member] (q5: [B, S, Hkv, G, D]):
/// scores [B, Hkv, S, G, T] = scale q5 . k, P = softmax over T (masked
/// keys after the query position when causal), then
/// dV = P^T dO, dP = dO v^T, dS = scale P (dP - sum(dP P)),
/// dQ = dS k, dK = dS^T q.
LogicalResult Differentiator::attentionRule(AttentionOp op, Value g) {
  if (op.getOffset())
    return op.emitError() << "--par-autodiff runs on global programs; this "
                             "attention already has a per-device offset";
  Value q = op.getQ(), k = op.getK(), v = op.getV();
  RankedTensorType qt = typeOf(q), kt = typeOf(k);
  int64_t B = qt.getDimSize(0), S = qt.getDimSize(1), H = qt.getDimSize(2),
          D = qt.getDimSize(3), T = kt.getDimSize(1), Hkv = kt.getDimSize(2);
  int64_t G = H / Hkv;
  double scaleValue = op.getScale() ? op.getScale()->convertToDouble()
                                    : 1.0 / std::sqrt(double(D));
  Type f = qt.getElementType();
  Value q5 = reshape(q, {B, S, Hkv, G, D});
  Value dO5 = reshape(g, {B, S, Hkv, G, D});
  SmallVector<int64_t> scoreShape{B, Hkv, S, G, T};
  auto scoreType = RankedTensorType::get(scoreShape, f);
  Value scores = scale(dot(q5, k, {0, 2}, {0, 2}, {4}, {3}, scoreShape),
                       scaleValue);
  Value mask;
  if (op.getCausal()) {
    auto maskType = RankedTensorType::get({S, T}, b.getI1Type());
    SmallVector<bool> visible;
    for (int64_t s = 0; s < S; ++s)
      for (int64_t t = 0; t < T; ++t)
        visible.push_back(t <= s + op.getPositionOffset());
    Value table = ConstantOp::create(b, loc, maskType,
                                     DenseElementsAttr::get(maskType, visible));
    mask = broadcast(table, cast<RankedTensorType>(getI1TensorLike(scoreType)),
                     {2, 4});
    double lowest = APFloat::getLargest(cast<FloatType>(f).getFloatSemantics(),
                                        /*Negative=*/true)
                        .convertToDouble();
    scores = select(mask, scores, splat(scoreType, lowest));
  }
  Value p = SoftmaxOp::create(b, loc, scoreType, scores, (uint64_t)4);
  if (mask)
    p = select(mask, p, splat(scoreType, 0.0));
  if (varied.contains(v))
    accumulate(v, transpose(dot(p, dO5, {0, 1}, {0, 2}, {2, 3}, {1, 3},
                                {B, Hkv, T, D}),
                            {0, 2, 1, 3}));
  Value dp = dot(dO5, v, {0, 2}, {0, 2}, {4}, {3}, scoreShape);
  Value rowDot = broadcast(reduceSum(mul(dp, p), {4}), scoreType, {0, 1, 2, 3});
  Value ds = scale(mul(p, sub(dp, rowDot)), scaleValue);
  if (varied.contains(q))
    accumulate(q, reshape(transpose(dot(ds, k, {0, 1}, {0, 2}, {4}, {1},
                                        {B, Hkv, S, G, D}),
                                    {0, 2, 1, 3, 4}),
                          {B, S, H, D}));
  if (varied.contains(k))
    accumulate(k, transpose(dot(ds, q5, {0, 1}, {0, 2}, {2, 3}, {1, 3},
                                {B, Hkv, T, D}),
                            {0, 2, 1, 3}));
  return success();
}

/// Rope is a rotation by the position's angle; its transpose rotates back:
/// R(-a) = J R(a) J with J negating the second half of the head dim.
LogicalResult Differentiator::ropeRule(RopeOp op, Value g) {
  RankedTensorType t = typeOf(g);
  int64_t d = t.getDimSize(3);
  auto signType = RankedTensorType::get({d}, t.getElementType());
  SmallVector<Attribute> signs;
  for (int64_t i = 0; i < d; ++i)
    signs.push_back(b.getFloatAttr(t.getElementType(), i < d / 2 ? 1.0 : -1.0));
  Value sign = broadcast(
      ConstantOp::create(b, loc, signType, DenseElementsAttr::get(signType, signs)),
      t, {3});
  Value rotated = RopeOp::create(b, loc, t, mul(g, sign), op.getOffset(),
                                 op.getThetaAttr(), op.getPositionOffsetAttr());
  accumulate(op.getInput(), mul(rotated, sign));
  return success();
}

/// The error for an op the loss depends on that has no gradient rule.
static LogicalResult noRule(Operation *op, StringRef detail) {
  return op->emitError() << "--par-autodiff: no gradient rule for '"
                         << op->getName() << "'" << detail
                         << "; the loss depends on it through a parameter";
}

/// Applies `op`'s gradient rule; an op without one is an error (emitted).
LogicalResult Differentiator::backward(Operation *op, Value g) {
  if (succeeded(elementwise(op, g)))
    return success();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](SelectOp o) {
        Value zero = splatLike(g, 0.0);
        accumulate(o.getOnTrue(), select(o.getPred(), g, zero));
        accumulate(o.getOnFalse(), select(o.getPred(), zero, g));
        return success();
      })
      .Case([&](ConvertOp o) {
        accumulate(o.getInput(), g);
        return success();
      })
      .Case([&](BroadcastOp o) {
        // Sum over the new dims and the expanded size-1 dims.
        RankedTensorType in = typeOf(o.getInput()), out = typeOf(g);
        ArrayRef<int64_t> dims = o.getDims();
        SmallVector<int64_t> summed = complement(out.getRank(), dims);
        for (auto [i, d] : llvm::enumerate(dims))
          if (in.getDimSize(i) != out.getDimSize(d))
            summed.push_back(d);
        llvm::sort(summed);
        Value r = reduceSum(g, summed);
        if (typeOf(r).getShape() != in.getShape())
          r = ReshapeOp::create(
              b, loc, RankedTensorType::get(in.getShape(), out.getElementType()),
              r);
        accumulate(o.getInput(), r);
        return success();
      })
      .Case([&](ReduceOp o) {
        RankedTensorType in = typeOf(o.getInput());
        ArrayRef<int64_t> dims = o.getDims();
        auto gradType = RankedTensorType::get(in.getShape(),
                                              typeOf(g).getElementType());
        SmallVector<int64_t> kept = complement(in.getRank(), dims);
        Value spread = broadcast(g, gradType, kept);
        switch (o.getKind()) {
        case ReduceKind::sum:
          accumulate(o.getInput(), spread);
          break;
        case ReduceKind::mean: {
          int64_t count = 1;
          for (int64_t d : dims)
            count *= in.getDimSize(d);
          accumulate(o.getInput(), scale(spread, 1.0 / count));
          break;
        }
        case ReduceKind::max:
        case ReduceKind::min: {
          // The elements equal to the extreme share the gradient equally.
          Value extreme = broadcast(o.getResult(), in, kept);
          Value hit = compare(CompareDirection::eq, o.getInput(), extreme);
          Value ones = select(hit, splatLike(spread, 1.0), splatLike(spread, 0.0));
          Value count = broadcast(reduceSum(ones, dims), gradType, kept);
          accumulate(o.getInput(), div(mul(ones, spread), count));
          break;
        }
        }
        return success();
      })
      .Case([&](TransposeOp o) {
        ArrayRef<int64_t> perm = o.getPerm();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = i;
        accumulate(o.getInput(),
                   TransposeOp::create(
                       b, loc,
                       RankedTensorType::get(typeOf(o.getInput()).getShape(),
                                             typeOf(g).getElementType()),
                       g, b.getDenseI64ArrayAttr(inverse)));
        return success();
      })
      .Case([&](ReshapeOp o) {
        accumulate(o.getInput(),
                   ReshapeOp::create(b, loc, o.getInput().getType(), g));
        return success();
      })
      .Case([&](DotOp o) { return dotRule(o, g); })
      .Case([&](SoftmaxOp o) {
        // dx = y (g - sum(g y)) over the softmax dim.
        Value y = o.getResult();
        int64_t dim = o.getDim();
        RankedTensorType t = typeOf(y);
        Value dotted =
            broadcast(reduceSum(mul(g, y), {dim}), t, complement(t.getRank(), {dim}));
        accumulate(o.getInput(), mul(y, sub(g, dotted)));
        return success();
      })
      .Case([&](CrossEntropyOp o) {
        // d logits = (softmax(logits) - onehot(labels)) g / tokens.
        Value logits = o.getLogits();
        RankedTensorType t = typeOf(logits);
        int64_t last = t.getRank() - 1, tokens = 1;
        for (int64_t d = 0; d < last; ++d)
          tokens *= t.getDimSize(d);
        Value p = SoftmaxOp::create(b, loc, t, logits, (uint64_t)last);
        Value hot = oneHot(o.getLabels(), t.getDimSize(last), t.getElementType());
        Value perToken = broadcast(scale(g, 1.0 / tokens), t, {});
        accumulate(logits, mul(sub(p, hot), perToken));
        return success();
      })
      .Case([&](EmbeddingOp o) {
        // d table[v] += g over the tokens whose id is v: g scattered into
        // the table's rows at the ids.
        RankedTensorType table = typeOf(o.getTable());
        SmallVector<int64_t> at(typeOf(o.getIds()).getShape());
        at.push_back(1);
        Value d = ScatterAddOp::create(b, loc, table, splat(table, 0.0),
                                       reshape(o.getIds(), at), g,
                                       b.getDenseI64ArrayAttr({0}));
        accumulate(o.getTable(), d);
        return success();
      })
      .Case([&](ScatterAddOp o) { return scatterAddRule(o, g); })
      .Case([&](SliceOp o) {
        if (o.getStrides() &&
            llvm::any_of(*o.getStrides(), [](int64_t s) { return s != 1; }))
          return noRule(o, " with strides");
        // Pad the gradient back with zeros around the slice, dim by dim.
        RankedTensorType in = typeOf(o.getInput());
        Value r = g;
        for (int64_t d = 0; d < in.getRank(); ++d) {
          int64_t before = o.getStarts()[d];
          int64_t after = in.getDimSize(d) - o.getLimits()[d];
          SmallVector<Value> pieces;
          auto zeros = [&](int64_t size) {
            SmallVector<int64_t> shape(typeOf(r).getShape());
            shape[d] = size;
            return splat(RankedTensorType::get(shape, typeOf(r).getElementType()),
                         0.0);
          };
          if (before == 0 && after == 0)
            continue;
          if (before)
            pieces.push_back(zeros(before));
          pieces.push_back(r);
          if (after)
            pieces.push_back(zeros(after));
          SmallVector<int64_t> shape(typeOf(r).getShape());
          shape[d] = in.getDimSize(d);
          r = ConcatOp::create(
              b, loc, RankedTensorType::get(shape, typeOf(r).getElementType()),
              pieces, (uint64_t)d);
        }
        accumulate(o.getInput(), r);
        return success();
      })
      .Case([&](ConcatOp o) {
        int64_t dim = o.getDim(), start = 0;
        RankedTensorType gt = typeOf(g);
        for (Value input : o.getInputs()) {
          RankedTensorType it = typeOf(input);
          SmallVector<int64_t> starts(gt.getRank(), 0), limits(gt.getShape());
          starts[dim] = start;
          limits[dim] = start + it.getDimSize(dim);
          start = limits[dim];
          accumulate(input,
                     SliceOp::create(
                         b, loc,
                         RankedTensorType::get(it.getShape(), gt.getElementType()),
                         g, b.getDenseI64ArrayAttr(starts),
                         b.getDenseI64ArrayAttr(limits), DenseI64ArrayAttr()));
        }
        return success();
      })
      .Case([&](AttentionOp o) { return attentionRule(o, g); })
      .Case([&](RopeOp o) { return ropeRule(o, g); })
      .Case<LayerNormOp, RmsNormOp>(
          [&](Operation *norm) { return layerNormRule(norm, g); })
      .Case([&](ShardingConstraintOp o) {
        // The gradient keeps the value's layout.
        accumulate(o.getInput(), ShardingConstraintOp::create(
                                     b, loc, g.getType(), g, o.getSharding()));
        return success();
      })
      .Default([&](Operation *other) { return noRule(other, ""); });
}

Value Differentiator::lowerPrecision(FloatType low, Value loss) {
  Block &body = func.getBody().front();
  auto lowType = [&](Type type) -> Type {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.getElementType().isF32())
      return type;
    return RankedTensorType::get(tensor.getShape(), low);
  };
  b.setInsertionPointToStart(&body);
  for (BlockArgument arg : body.getArguments()) {
    Type type = lowType(arg.getType());
    if (type == arg.getType())
      continue;
    auto copy = ConvertOp::create(b, arg.getLoc(), type, arg);
    setCopyOf(copy, arg.getArgNumber());
    arg.replaceAllUsesExcept(copy.getResult(), copy);
    lowCopies[arg] = copy.getResult();
    copyOps.insert(copy);
  }
  const llvm::fltSemantics &semantics = low.getFloatSemantics();
  for (Operation &op : body.without_terminator()) {
    if (copyOps.contains(&op))
      continue;
    for (OpResult result : op.getResults())
      result.setType(lowType(result.getType()));
    auto constant = dyn_cast<ConstantOp>(op);
    if (!constant)
      continue;
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense || !dense.getElementType().isF32())
      continue;
    constant.setValueAttr(dense.mapValues(low, [&](const APFloat &value) {
      APFloat converted = value;
      bool lost;
      converted.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
      return converted.bitcastToAPInt();
    }));
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  b.setInsertionPoint(ret);
  Value loss32 = loss;
  if (typeOf(loss).getElementType() == low)
    loss32 = ConvertOp::create(b, ret.getLoc(),
                               RankedTensorType::get({}, b.getF32Type()), loss);
  ret.setOperand(0, loss32);
  return loss32;
}

LogicalResult Differentiator::run() {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (func.getNumResults() == 0 || !isFloat(ret.getOperand(0)) ||
      typeOf(ret.getOperand(0)).getRank() != 0)
    return func.emitError()
           << "--par-autodiff needs a first result that is a 0-d "
              "floating-point loss, @"
           << func.getSymName() << " returns " << func.getResultTypes();
  Value loss = ret.getOperand(0);
  // The forward pass: the function's ops and what mixed precision adds.
  stamper.phase = Phase::forward;
  for (Operation &op : body.without_terminator())
    setPhase(&op, Phase::forward);
  FloatType low;
  if (config.precision == "bf16")
    low = b.getBF16Type();
  else if (config.precision == "fp16")
    low = b.getF16Type();
  if (low)
    loss = lowerPrecision(low, loss);

  // Parameters: par.role = "param", or floating-point without a role.
  SmallVector<unsigned> params;
  for (BlockArgument arg : body.getArguments()) {
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  ParDialect::kRoleAttrName);
    if (role ? role.getValue() == "param" : isFloat(arg)) {
      params.push_back(arg.getArgNumber());
      varied.insert(arg);
    }
  }
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      varied.insert(op.result_begin(), op.result_end());

  MLIRContext *ctx = func.getContext();
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  b.setInsertionPoint(ret);
  loc = ret.getLoc();
  // fp16: the loss is scaled by the state `loss_scale` (the gradient seed).
  BlockArgument lossScale;
  if (config.precision == "fp16") {
    unsigned index = func.getNumArguments();
    NamedAttrList attrs;
    attrs.set(ParDialect::kNameAttrName, StringAttr::get(ctx, "loss_scale"));
    attrs.set(ParDialect::kRoleAttrName, StringAttr::get(ctx, "param"));
    attrs.set(ParDialect::kInitAttrName,
              StringAttr::get(ctx, "constant(" + std::to_string(config.lossScale) + ")"));
    if (failed(func.insertArgument(index, scalar, attrs.getDictionary(ctx), loc)))
      return failure();
    lossScale = body.getArgument(index);
  }
  stamper.phase = Phase::backward;
  adjoints[loss] = lossScale ? Value(lossScale) : splatLike(loss, 1.0);

  // Reverse sweep: an op whose results have gradients passes them on.
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (op->getNumResults() == 0)
      continue;
    Value g = adjoints.lookup(op->getResult(0));
    if (!g || copyOps.contains(op))
      continue; // the gradient of a master weight is its copy's
    if (op->getNumResults() != 1)
      return op->emitError() << "--par-autodiff: no gradient rule for '"
                             << op->getName() << "'";
    loc = op->getLoc();
    b.setInsertionPoint(ret);
    if (failed(backward(op, g)))
      return failure(); // backward() said why
  }

  auto nameOf = [&](unsigned i) -> std::string {
    if (auto name = func.getArgAttrOfType<StringAttr>(i, ParDialect::kNameAttrName))
      return name.str();
    return "arg" + std::to_string(i);
  };
  loc = ret.getLoc();
  b.setInsertionPoint(ret);
  SmallVector<Value> grads;
  for (unsigned i : params) {
    // With mixed precision, the low-precision gradient of the copy.
    Value arg = body.getArgument(i);
    Value of = lowCopies.lookup(arg) ? lowCopies.lookup(arg) : arg;
    Value g = adjoints.lookup(of);
    grads.push_back(g ? g : splatLike(of, 0.0));
  }
  // Each gradient, and each conversion, unscaling and clipping of it below,
  // says whose gradient it is.
  auto markGradients = [&] {
    for (auto [k, i] : llvm::enumerate(params))
      if (Operation *def = grads[k].getDefiningOp())
        addGradientOf(def, i);
  };
  markGradients();
  stamper.phase = Phase::optimizer;

  SmallVector<Value> results{loss};
  SmallVector<NamedAttrList> resultAttrs(1);
  resultAttrs[0].set(ParDialect::kNameAttrName, StringAttr::get(ctx, "loss"));
  auto addState = [&](Type type, const std::string &name) -> BlockArgument {
    unsigned index = func.getNumArguments();
    NamedAttrList attrs;
    attrs.set(ParDialect::kNameAttrName, StringAttr::get(ctx, name));
    attrs.set(ParDialect::kRoleAttrName, StringAttr::get(ctx, "param"));
    attrs.set(ParDialect::kInitAttrName, StringAttr::get(ctx, "zeros"));
    if (failed(func.insertArgument(index, type, attrs.getDictionary(ctx), loc)))
      return BlockArgument();
    return body.getArgument(index);
  };
  // fp16: a step whose gradients are not all finite changes nothing.
  Value skip;
  auto update = [&](Value value, unsigned argIndex) {
    if (skip) {
      auto type = typeOf(value);
      value = select(broadcast(skip, cast<RankedTensorType>(getI1TensorLike(type)), {}),
                     body.getArgument(argIndex), value);
    }
    results.push_back(value);
    NamedAttrList attrs;
    attrs.set(ParDialect::kUpdatesAttrName,
              IntegerAttr::get(IntegerType::get(ctx, 64), argIndex));
    resultAttrs.push_back(attrs);
  };

  auto logResult = [&](Value value, StringRef name) {
    results.push_back(value);
    NamedAttrList attrs;
    attrs.set(ParDialect::kNameAttrName, StringAttr::get(ctx, name));
    resultAttrs.push_back(attrs);
  };

  if (lossScale) {
    // Unscale in fp32; a non-finite gradient element makes the sum of
    // g * 0 a NaN, the only value not equal to itself.
    Value inverse = div(splat(scalar, 1.0), lossScale);
    Value poison;
    for (Value &g : grads) {
      Value g32 = convertTo(g, b.getF32Type());
      if (g32 != g)
        if (Operation *def = g32.getDefiningOp())
          for (int64_t param : getGradientOf(g.getDefiningOp()))
            addGradientOf(def, param);
      g = mul(g32, broadcast(inverse, typeOf(g32), {}));
      Value sum = sumAll(mul(g, splatLike(g, 0.0)));
      poison = poison ? add(poison, sum) : sum;
    }
    if (poison)
      skip = compare(CompareDirection::ne, poison, poison);
    markGradients();
  }

  // Global gradient-norm clipping: the squared sums of every gradient add
  // up to one norm (all-reduced across shards by the partitioner).
  if (config.clip > 0 && !grads.empty()) {
    Value squares;
    for (Value g : grads) {
      Value g32 = convertTo(g, b.getF32Type());
      Value sum = sumAll(mul(g32, g32));
      squares = squares ? add(squares, sum) : sum;
    }
    Value norm = SqrtOp::create(b, loc, scalar, squares);
    Value factor = MinOp::create(
        b, loc, scalar, splat(scalar, 1.0),
        div(splat(scalar, config.clip), add(norm, splat(scalar, 1e-6))));
    for (Value &g : grads)
      g = mul(g, broadcast(convertTo(factor, typeOf(g).getElementType()),
                           typeOf(g), {}));
    markGradients();
    logResult(norm, "log.grad_norm");
  }

  if (config.kind == "none") {
    for (auto [k, i] : llvm::enumerate(params))
      logResult(grads[k], "grad." + nameOf(i));
  } else {
    // The step counter t (1-based after the increment) drives the
    // learning-rate schedule and AdamW's bias correction.
    BlockArgument step = addState(scalar, "step");
    Value t = add(step, splat(scalar, 1.0));
    Value lr;
    if (config.warmup == 0 && config.decaySteps == 0) {
      lr = splat(scalar, config.lr);
    } else {
      // The schedule as a table [steps + 1, 1] looked up at min(t, steps).
      int64_t last = std::max(config.warmup, config.decaySteps) + 1;
      auto tableType = RankedTensorType::get({last + 1, 1}, b.getF32Type());
      SmallVector<float> rates;
      for (int64_t i = 0; i <= last; ++i)
        rates.push_back(float(scheduledLr(config, std::max<int64_t>(i, 1))));
      Value table = ConstantOp::create(
          b, loc, tableType,
          DenseElementsAttr::get(tableType, ArrayRef<float>(rates)));
      auto i32 = RankedTensorType::get({}, b.getI32Type());
      Value index = MinOp::create(b, loc, i32,
                                  ConvertOp::create(b, loc, i32, t),
                                  splat(i32, double(last)));
      Value ids = reshape(index, {1});
      Value row = EmbeddingOp::create(
          b, loc, RankedTensorType::get({1, 1}, b.getF32Type()), table, ids);
      lr = reshape(row, {});
    }
    for (auto [k, i] : llvm::enumerate(params)) {
      Value param = body.getArgument(i);
      if (config.kind == "sgd") {
        // Plain SGD (momentum 0) keeps no momentum buffer.
        BlockArgument buf;
        if (config.momentum != 0)
          buf = addState(param.getType(), nameOf(i) + ".momentum");
        auto sgd = SgdOp::create(b, loc, param.getType(),
                                 buf ? param.getType() : Type(), param, grads[k],
                                 buf, lr, b.getF32FloatAttr(config.momentum),
                                 b.getF32FloatAttr(config.weightDecay),
                                 /*nesterov=*/UnitAttr());
        update(sgd.getNewParam(), i);
        if (buf)
          update(sgd.getNewMomentum(), buf.getArgNumber());
        continue;
      }
      BlockArgument m = addState(param.getType(), nameOf(i) + ".m");
      BlockArgument v = addState(param.getType(), nameOf(i) + ".v");
      auto adam = AdamWOp::create(
          b, loc, param.getType(), param.getType(), param.getType(), param,
          grads[k], m, v, lr, t, b.getF32FloatAttr(config.beta1),
          b.getF32FloatAttr(config.beta2), b.getF32FloatAttr(config.epsilon),
          b.getF32FloatAttr(config.weightDecay));
      update(adam.getNewParam(), i);
      update(adam.getNewM(), m.getArgNumber());
      update(adam.getNewV(), v.getArgNumber());
    }
    update(t, step.getArgNumber());
    logResult(lr, "log.lr");
  }

  if (lossScale) {
    // Halve the scale after a skipped step; double it after scale-window
    // clean steps in a row.
    BlockArgument clean = addState(scalar, "loss_scale.clean_steps");
    BlockArgument skipped = addState(scalar, "loss_scale.skipped");
    Value zero = splat(scalar, 0.0), one = splat(scalar, 1.0);
    if (!skip)
      skip = compare(CompareDirection::ne, zero, zero);
    Value cleanNext = add(clean, one);
    Value grow = compare(CompareDirection::ge, cleanNext,
                         splat(scalar, double(config.scaleWindow)));
    Value newScale = select(skip, scale(lossScale, 0.5),
                            select(grow, scale(lossScale, 2.0), lossScale));
    Value newClean = select(skip, zero, select(grow, zero, cleanNext));
    Value newSkipped = add(skipped, select(skip, one, zero));
    skip = Value(); // the scale states always update
    update(newScale, lossScale.getArgNumber());
    update(newClean, clean.getArgNumber());
    update(newSkipped, skipped.getArgNumber());
    // The scale this step used (a copy: the state itself is replaced).
    logResult(scale(lossScale, 1.0), "log.loss_scale");
    logResult(newSkipped, "log.skipped");
  }

  if (config.zero > 0) {
    func->setAttr(ParDialect::kZeroAttrName, b.getI64IntegerAttr(config.zero));
    func->setAttr(ParDialect::kDataAxisAttrName, b.getStringAttr(config.dataAxis));
  }

  // The step's results replace the forward function's; what neither the
  // loss nor the gradients need (the other forward results, gradients of
  // values the parameters do not reach) is removed.
  stamper.phase.reset(); // the terminator belongs to no phase
  auto newRet = func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  SmallVector<Operation *> all;
  for (Operation &op : body.without_terminator())
    all.push_back(&op);
  for (Operation *op : llvm::reverse(all))
    if (isOpTriviallyDead(op))
      op->erase();
  SmallVector<DictionaryAttr> attrs;
  for (NamedAttrList &list : resultAttrs)
    attrs.push_back(list.getDictionary(ctx));
  func.setType(FunctionType::get(ctx, body.getArgumentTypes(),
                                 newRet.getOperandTypes()));
  func.setAllResultAttrs(attrs);
  return success();
}

namespace {
struct AutodiffPass : public par::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    if (optimizer != "none" && optimizer != "sgd" && optimizer != "adamw") {
      getOperation().emitError()
          << "--par-autodiff optimizer must be none, sgd or adamw, got '"
          << optimizer << "'";
      return signalPassFailure();
    }
    if (clip < 0 || warmup < 0 || decaySteps < 0 || lr <= 0) {
      getOperation().emitError()
          << "--par-autodiff needs lr > 0 and non-negative clip, warmup and "
             "decay-steps";
      return signalPassFailure();
    }
    if (precision != "fp32" && precision != "bf16" && precision != "fp16") {
      getOperation().emitError()
          << "--par-autodiff precision must be fp32, bf16 or fp16, got '"
          << precision << "'";
      return signalPassFailure();
    }
    if (zero < 0 || zero > 3) {
      getOperation().emitError()
          << "--par-autodiff zero must be 0, 1, 2 or 3, got " << int64_t(zero);
      return signalPassFailure();
    }
    if (zero > 0 && optimizer == "none") {
      getOperation().emitError()
          << "--par-autodiff zero=" << int64_t(zero)
          << " needs an optimizer (sgd or adamw)";
      return signalPassFailure();
    }
    if (lossScale <= 0 || scaleWindow <= 0) {
      getOperation().emitError()
          << "--par-autodiff needs loss-scale > 0 and scale-window > 0";
      return signalPassFailure();
    }
    OptimizerConfig config{optimizer,  lr,        momentum,   weightDecay,
                           beta1,      beta2,     epsilon,    clip,
                           warmup,     decaySteps, minLrRatio, precision,
                           lossScale,  scaleWindow, zero,       dataAxis};
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      if (failed(Differentiator(func, config).run()))
        return signalPassFailure();
    }
  }
};
} // namespace
