//===- Differentiator.h - --par-autodiff's reverse sweep --------*- C++ -*-===//
//
// Private to lib/Transforms/Training: the state of one function's
// differentiation, shared by the reverse sweep (Autodiff.cpp), the gradient
// rules (GradientRules.cpp), mixed precision (MixedPrecision.cpp) and the
// optimizer step (Optimizer.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRANSFORMS_TRAINING_DIFFERENTIATOR_H
#define PAR_TRANSFORMS_TRAINING_DIFFERENTIATOR_H

#include "par/Dialect/Par/IR/ParConstants.h"
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <numeric>
#include <string>

namespace mlir::par::autodiff {

struct OptimizerConfig {
  OptimizerKind kind;
  double lr, momentum, weightDecay, beta1, beta2, epsilon;
  double clip;
  int64_t warmup, decaySteps;
  double minLrRatio;
  Precision precision;
  double lossScale;
  int64_t scaleWindow;
  int64_t zero;
  std::string dataAxis;
};

/// The learning rate at step t (1-based): linear warm-up, then a cosine to
/// minLrRatio lr at decaySteps, constant after.
double scheduledLr(const OptimizerConfig &c, int64_t t);

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
  Value splatLike(Value like, double value) {
    return splat(typeOf(like), value);
  }
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
    return CompareOp::create(
        b, loc, getI1TensorLike(x.getType()),
        CompareDirectionAttr::get(b.getContext(), direction), x, y);
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
  AttentionOp withStatistics(AttentionOp op);
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

  /// FlatViews.cpp: with ZeRO over a data axis of N > 1 devices, makes
  /// each parameter that propagation leaves unsplit and that has no dim
  /// divisible by N (or fewer than N elements) a flat argument (par.view)
  /// read through a view (a slice when padded, a reshape; par.view_of).
  void flattenForZero();

  /// Mixed precision: computes the forward pass in `low`: every fp32
  /// argument is converted once at the top, every fp32 value becomes `low`,
  /// and the loss is converted back. Returns the fp32 loss.
  Value lowerPrecision(FloatType low, Value loss);

  /// Optimizer.cpp: after the reverse sweep, turns the gradients of
  /// `params` into the step's updates and results (unscaling, clipping,
  /// the optimizer, the loss-scale states) and replaces the terminator.
  LogicalResult buildStep(func::ReturnOp ret, Value loss,
                          BlockArgument lossScale, ArrayRef<unsigned> params,
                          SmallVector<Value> grads);
};

} // namespace mlir::par::autodiff

#endif // PAR_TRANSFORMS_TRAINING_DIFFERENTIATOR_H
