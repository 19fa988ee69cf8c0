//===- Optimizer.cpp - The optimizer phase of a training step -------------===//
//
// After the reverse sweep: fp16 unscaling and the skip of non-finite
// steps, global gradient-norm clipping, the learning-rate schedule, one
// update op per parameter with its states as new arguments the step
// replaces (par.updates), the loss-scale states, and the step's results.
// Everything built here is in the optimizer phase.
//
//===----------------------------------------------------------------------===//
#include "Differentiator.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::autodiff;

/// The learning rate at step t (1-based): linear warm-up, then a cosine to
/// minLrRatio lr at decaySteps, constant after.
double mlir::par::autodiff::scheduledLr(const OptimizerConfig &c, int64_t t) {
  if (c.warmup > 0 && t <= c.warmup)
    return c.lr * double(t) / double(c.warmup);
  if (c.decaySteps <= c.warmup)
    return c.lr;
  double progress =
      std::min(1.0, double(t - c.warmup) / double(c.decaySteps - c.warmup));
  return c.lr * (c.minLrRatio +
                 (1 - c.minLrRatio) * 0.5 * (1 + std::cos(M_PI * progress)));
}

LogicalResult Differentiator::buildStep(func::ReturnOp ret, Value loss,
                                        BlockArgument lossScale,
                                        ArrayRef<unsigned> params,
                                        SmallVector<Value> grads) {
  Block &body = func.getBody().front();
  MLIRContext *ctx = func.getContext();
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  auto nameOf = [&](unsigned i) -> std::string {
    if (auto name =
            func.getArgAttrOfType<StringAttr>(i, ParDialect::kNameAttrName))
      return name.str();
    return "arg" + std::to_string(i);
  };
  auto markGradients = [&] {
    for (auto [k, i] : llvm::enumerate(params))
      if (Operation *def = grads[k].getDefiningOp())
        addGradientOf(def, i);
  };
  loc = ret.getLoc();
  b.setInsertionPoint(ret);

  SmallVector<Value> results{loss};
  SmallVector<NamedAttrList> resultAttrs(1);
  resultAttrs[0].set(ParDialect::kNameAttrName, StringAttr::get(ctx, "loss"));
  // A state of parameter `of` (if any) is flat when the parameter is, with
  // the same view. States are block arguments at once; the function's type
  // and argument attributes take them all at the end (one rewrite of the
  // signature, not one per state).
  unsigned firstState = func.getNumArguments();
  SmallVector<DictionaryAttr> stateAttrs;
  auto addState = [&](Type type, const std::string &name,
                      std::optional<unsigned> of = {}) -> BlockArgument {
    NamedAttrList attrs;
    attrs.set(ParDialect::kNameAttrName, StringAttr::get(ctx, name));
    attrs.set(ParDialect::kRoleAttrName, StringAttr::get(ctx, "param"));
    attrs.set(ParDialect::kInitAttrName, StringAttr::get(ctx, "zeros"));
    if (of)
      if (std::optional<SmallVector<int64_t>> view = getViewShape(func, *of))
        attrs.set(ParDialect::kViewAttrName, b.getDenseI64ArrayAttr(*view));
    stateAttrs.push_back(attrs.getDictionary(ctx));
    return body.addArgument(type, loc);
  };
  // An argument attribute of the step, states not yet in the signature
  // included.
  auto argAttr = [&](unsigned index, StringRef name) -> Attribute {
    if (index < firstState)
      return func.getArgAttr(index, name);
    return stateAttrs[index - firstState].get(name);
  };
  // fp16: a step whose gradients are not all finite changes nothing.
  Value skip;
  auto update = [&](Value value, unsigned argIndex) {
    if (skip) {
      auto type = typeOf(value);
      value = select(
          broadcast(skip, cast<RankedTensorType>(getI1TensorLike(type)), {}),
          body.getArgument(argIndex), value);
    }
    results.push_back(value);
    NamedAttrList attrs;
    attrs.set(ParDialect::kUpdatesAttrName,
              IntegerAttr::get(IntegerType::get(ctx, 64), argIndex));
    // The new value keeps the layout a user gave the parameter, whatever
    // layout its gradient arrives in.
    if (Attribute sharding = argAttr(argIndex, ParDialect::kShardingAttrName))
      attrs.set(ParDialect::kShardingAttrName, sharding);
    if (auto view = dyn_cast_or_null<DenseI64ArrayAttr>(
            argAttr(argIndex, ParDialect::kViewAttrName)))
      attrs.set(ParDialect::kViewAttrName, view);
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
    for (size_t k = 0; k < grads.size(); ++k) {
      Value &g = grads[k];
      Value g32 = convertTo(g, b.getF32Type());
      // This conversion is of parameter k's gradient alone.
      if (g32 != g)
        if (Operation *def = g32.getDefiningOp())
          addGradientOf(def, params[k]);
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

  if (config.kind == OptimizerKind::none) {
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
      Value index =
          MinOp::create(b, loc, i32, ConvertOp::create(b, loc, i32, t),
                        splat(i32, double(last)));
      Value ids = reshape(index, {1});
      Value row = EmbeddingOp::create(
          b, loc, RankedTensorType::get({1, 1}, b.getF32Type()), table, ids);
      lr = reshape(row, {});
    }
    for (auto [k, i] : llvm::enumerate(params)) {
      Value param = body.getArgument(i);
      if (config.kind == OptimizerKind::sgd) {
        // Plain SGD (momentum 0) keeps no momentum buffer.
        BlockArgument buf;
        if (config.momentum != 0)
          buf = addState(param.getType(), nameOf(i) + ".momentum", i);
        auto sgd = SgdOp::create(
            b, loc, param.getType(), buf ? param.getType() : Type(), param,
            grads[k], buf, lr, b.getF32FloatAttr(config.momentum),
            b.getF32FloatAttr(config.weightDecay),
            /*nesterov=*/UnitAttr());
        update(sgd.getNewParam(), i);
        if (buf)
          update(sgd.getNewMomentum(), buf.getArgNumber());
        continue;
      }
      BlockArgument m = addState(param.getType(), nameOf(i) + ".m", i);
      BlockArgument v = addState(param.getType(), nameOf(i) + ".v", i);
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

  // The states join the signature.
  if (!stateAttrs.empty()) {
    SmallVector<Attribute> argAttrs;
    for (unsigned i = 0; i < firstState; ++i)
      argAttrs.push_back(func.getArgAttrDict(i));
    for (DictionaryAttr dict : stateAttrs)
      argAttrs.push_back(dict);
    func.setType(
        FunctionType::get(ctx, body.getArgumentTypes(), func.getResultTypes()));
    func.setAllArgAttrs(argAttrs);
  }

  if (config.zero > 0) {
    setZero(func, config.zero, config.dataAxis);
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
