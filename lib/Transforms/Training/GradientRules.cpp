//===- GradientRules.cpp - Each op's gradient, in catalogue ops -----------===//
//
// One rule per op (backward() dispatches on the op), written in ops of the
// catalogue so the backward pass carries sharding rules, propagates,
// partitions and runs like the forward pass.
//
//===----------------------------------------------------------------------===//
#include "Differentiator.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::autodiff;

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
        Value dt =
            scale(mul(sub(one(), mul(t, t)), add(one(), scale(x2, 3 * c))), k);
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
  ArrayRef<int64_t> lb =
      op.getLhsBatch() ? *op.getLhsBatch() : ArrayRef<int64_t>();
  ArrayRef<int64_t> rb =
      op.getRhsBatch() ? *op.getRhsBatch() : ArrayRef<int64_t>();
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
      row = select(compare(CompareDirection::lt, c, splat(entryType, 0.0)),
                   none, row);
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
  return DotOp::create(
      b, loc, RankedTensorType::get(shape, typeOf(x).getElementType()), x, y,
      xbAttr, ybAttr, b.getDenseI64ArrayAttr(xc), b.getDenseI64ArrayAttr(yc));
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

/// `op` returning its row statistics too: `op` itself when it does, else
/// a copy in its place (same operands, attributes and marks) that takes
/// over its uses and its entries in the sweep's maps.
AttentionOp Differentiator::withStatistics(AttentionOp op) {
  if (op.getStats())
    return op;
  RankedTensorType q = typeOf(op.getQ());
  Type f64 = b.getF64Type();
  Type element = q.getElementType() == f64 ? f64 : b.getF32Type();
  auto statsType = RankedTensorType::get(q.getShape().take_front(3), element);
  // A builder of its own: the copy is a forward op, not one of the
  // backward pass that `b` stamps.
  OpBuilder forward(op);
  auto copy = AttentionOp::create(
      forward, op.getLoc(), op.getResult().getType(), statsType, op.getQ(),
      op.getK(), op.getV(), op.getOffset(), op.getCausalAttr(),
      op.getScaleAttr(), op.getPositionOffsetAttr());
  // The marks carry over; a sharding the user gave the result becomes the
  // first of the two results' (the statistics split like its rows).
  ShardingAttr sharding = getResultSharding(op, 0);
  NamedAttrList marks(op->getDiscardableAttrDictionary());
  marks.erase(ParDialect::kShardingAttrName);
  copy->setDiscardableAttrs(marks.getDictionary(op->getContext()));
  if (sharding) {
    setResultSharding(copy, 0, sharding);
    setResultSharding(
        copy, 1,
        ShardingAttr::get(op->getContext(), sharding.getMesh(),
                          sharding.getDims().take_front(3),
                          sharding.getReplicatedAxes(),
                          sharding.getPartialAxes()));
  }
  Value old = op.getResult(), now = copy.getResult();
  old.replaceAllUsesWith(now);
  if (varied.erase(old))
    varied.insert(copy->result_begin(), copy->result_end());
  if (Value adjoint = adjoints.lookup(old)) {
    adjoints.erase(old);
    adjoints[now] = adjoint;
  }
  op.erase();
  return copy;
}

/// Attention's gradients come from its own gradient ops, which recompute
/// the weights tile by tile from the forward's row log-sum-exp: nothing
/// score-sized is kept or materialized.
LogicalResult Differentiator::attentionRule(AttentionOp op, Value g) {
  if (op.getOffset())
    return op.emitError() << "--par-autodiff runs on global programs; this "
                             "attention already has a per-device offset";
  Value q = op.getQ(), k = op.getK(), v = op.getV();
  bool wantQ = varied.contains(q),
       wantKv = varied.contains(k) || varied.contains(v);
  if (!wantQ && !wantKv)
    return success();
  AttentionOp fwd = withStatistics(op);
  Value out = fwd.getResult(), stats = fwd.getStats();
  if (wantQ)
    accumulate(q, AttentionGradQOp::create(b, loc, typeOf(q), q, k, v, out, g,
                                           stats, Value(), fwd.getCausalAttr(),
                                           fwd.getScaleAttr(),
                                           fwd.getPositionOffsetAttr()));
  if (wantKv) {
    auto grads = AttentionGradKvOp::create(
        b, loc, typeOf(k), typeOf(v), q, k, v, out, g, stats, Value(),
        fwd.getCausalAttr(), fwd.getScaleAttr(), fwd.getPositionOffsetAttr());
    if (varied.contains(k))
      accumulate(k, grads.getGradK());
    if (varied.contains(v))
      accumulate(v, grads.getGradV());
  }
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
  Value sign =
      broadcast(ConstantOp::create(b, loc, signType,
                                   DenseElementsAttr::get(signType, signs)),
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
              b, loc,
              RankedTensorType::get(in.getShape(), out.getElementType()), r);
        accumulate(o.getInput(), r);
        return success();
      })
      .Case([&](ReduceOp o) {
        RankedTensorType in = typeOf(o.getInput());
        ArrayRef<int64_t> dims = o.getDims();
        auto gradType =
            RankedTensorType::get(in.getShape(), typeOf(g).getElementType());
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
          Value ones =
              select(hit, splatLike(spread, 1.0), splatLike(spread, 0.0));
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
        Value dotted = broadcast(reduceSum(mul(g, y), {dim}), t,
                                 complement(t.getRank(), {dim}));
        accumulate(o.getInput(), mul(y, sub(g, dotted)));
        return success();
      })
      .Case([&](LogSoftmaxOp o) {
        // dx = g - exp(y) sum(g) over the dim (exp(y) is the softmax).
        Value y = o.getResult();
        int64_t dim = o.getDim();
        RankedTensorType t = typeOf(y);
        Value total = broadcast(reduceSum(g, {dim}), t,
                                complement(t.getRank(), {dim}));
        accumulate(o.getInput(),
                   sub(g, mul(ExpOp::create(b, loc, t, y), total)));
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
        Value hot =
            oneHot(o.getLabels(), t.getDimSize(last), t.getElementType());
        // An f32 loss of bf16/f16 logits: its gradient in the logits' type.
        if (typeOf(g).getElementType() != t.getElementType())
          g = ConvertOp::create(
              b, loc, RankedTensorType::get({}, t.getElementType()), g);
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
      .Case([&](PadOp o) {
        // The operand landed at low + i * (interior + 1): that strided
        // slice of the gradient (the fill is a constant).
        RankedTensorType t = typeOf(o.getInput());
        SmallVector<int64_t> starts, limits, strides;
        SmallVector<int64_t> interior = o.getInteriorOrZeros();
        bool strided = false;
        for (int64_t d = 0; d < t.getRank(); ++d) {
          int64_t n = t.getDimSize(d), low = o.getLow()[d];
          starts.push_back(low);
          limits.push_back(n == 0 ? low : low + (n - 1) * (interior[d] + 1) + 1);
          strides.push_back(interior[d] + 1);
          strided |= interior[d] > 0;
        }
        accumulate(o.getInput(),
                   SliceOp::create(b, loc, t, g, b.getDenseI64ArrayAttr(starts),
                                   b.getDenseI64ArrayAttr(limits),
                                   strided ? b.getDenseI64ArrayAttr(strides)
                                           : DenseI64ArrayAttr()));
        return success();
      })
      .Case([&](GatherOp o) {
        // d operand: the gradient's slices added back where they were read.
        RankedTensorType t = typeOf(o.getOperand());
        accumulate(o.getOperand(),
                   ScatterAddOp::create(b, loc, t, splat(t, 0.0),
                                        o.getIndices(), g, o.getDimsAttr()));
        return success();
      })
      .Case([&](SliceOp o) {
        // The gradient padded back with zeros around the slice, and between
        // the strided elements.
        RankedTensorType in = typeOf(o.getInput()), out = typeOf(g);
        SmallVector<int64_t> strides = o.getStridesOrOnes();
        SmallVector<int64_t> low, high, interior;
        bool inner = false;
        for (int64_t d = 0; d < in.getRank(); ++d) {
          int64_t n = out.getDimSize(d), start = o.getStarts()[d];
          int64_t end = n == 0 ? start : start + (n - 1) * strides[d] + 1;
          low.push_back(start);
          high.push_back(in.getDimSize(d) - end);
          interior.push_back(strides[d] - 1);
          inner |= n > 1 && strides[d] > 1;
        }
        if (llvm::all_of(low, [](int64_t v) { return v == 0; }) &&
            llvm::all_of(high, [](int64_t v) { return v == 0; }) && !inner) {
          accumulate(o.getInput(), g);
          return success();
        }
        accumulate(o.getInput(),
                   PadOp::create(b, loc, in, g, b.getDenseI64ArrayAttr(low),
                                 b.getDenseI64ArrayAttr(high),
                                 inner ? b.getDenseI64ArrayAttr(interior)
                                       : DenseI64ArrayAttr(),
                                 b.getF64FloatAttr(0.0)));
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
                     SliceOp::create(b, loc,
                                     RankedTensorType::get(it.getShape(),
                                                           gt.getElementType()),
                                     g, b.getDenseI64ArrayAttr(starts),
                                     b.getDenseI64ArrayAttr(limits),
                                     DenseI64ArrayAttr()));
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
