//===- Autodiff.cpp - --par-autodiff: training steps from forward losses --===//
//
// Reverse-mode differentiation on the global program. Each op's gradient
// rule is written in ops of the catalogue, so the backward pass carries
// sharding rules, propagates, partitions and runs like the forward pass.
// The optimizer update follows, with its states as new parameters that the
// step replaces (par.updates).
//
//===----------------------------------------------------------------------===//
#include "Differentiator.h"

#include "par/Transforms/Passes.h"
#include "par/Transforms/ReportFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>
#include <numeric>

#define DEBUG_TYPE "par-autodiff"

namespace mlir::par {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::autodiff;

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
  flattenForZero();
  FloatType low;
  if (config.precision == Precision::bf16)
    low = b.getBF16Type();
  else if (config.precision == Precision::fp16)
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
  if (config.precision == Precision::fp16) {
    unsigned index = func.getNumArguments();
    NamedAttrList attrs;
    attrs.set(ParDialect::kNameAttrName, StringAttr::get(ctx, "loss_scale"));
    attrs.set(ParDialect::kRoleAttrName, StringAttr::get(ctx, "param"));
    attrs.set(ParDialect::kInitAttrName,
              StringAttr::get(ctx, "constant(" +
                                       std::to_string(config.lossScale) + ")"));
    if (failed(
            func.insertArgument(index, scalar, attrs.getDictionary(ctx), loc)))
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
    // Only a first result carries gradients (attention's row statistics
    // are not differentiated).
    for (Value other : op->getResults().drop_front())
      if (adjoints.count(other))
        return op->emitError()
               << "--par-autodiff: no gradient rule for result #"
               << cast<OpResult>(other).getResultNumber() << " of '"
               << op->getName() << "'";
    Value g = adjoints.lookup(op->getResult(0));
    if (!g || copyOps.contains(op))
      continue; // the gradient of a master weight is its copy's
    loc = op->getLoc();
    b.setInsertionPoint(ret);
    // The gradient of a layer's op belongs to the layer.
    stamper.layer = getLayer(op);
    if (failed(backward(op, g)))
      return failure(); // backward() said why
  }
  stamper.layer.reset();

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
  return buildStep(ret, loss, lossScale, params, std::move(grads));
}

namespace {
struct AutodiffPass : public par::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    if (clip < 0 || warmup < 0 || decaySteps < 0 || lr <= 0) {
      getOperation().emitError()
          << "--par-autodiff needs lr > 0 and non-negative clip, warmup and "
             "decay-steps";
      return signalPassFailure();
    }
    if (zero < 0 || zero > 3) {
      getOperation().emitError()
          << "--par-autodiff zero must be 0, 1, 2 or 3, got " << int64_t(zero);
      return signalPassFailure();
    }
    if (zero > 0 && optimizer == OptimizerKind::none) {
      getOperation().emitError() << "--par-autodiff zero=" << int64_t(zero)
                                 << " needs an optimizer (sgd or adamw)";
      return signalPassFailure();
    }
    if (lossScale <= 0 || scaleWindow <= 0) {
      getOperation().emitError()
          << "--par-autodiff needs loss-scale > 0 and scale-window > 0";
      return signalPassFailure();
    }
    if (prefetch < 0) {
      getOperation().emitError()
          << "--par-autodiff prefetch=" << int64_t(prefetch)
          << " must be 0 (gather just before the use) "
             "or a number of layers ahead";
      return signalPassFailure();
    }
    if (prefetch > 0 && zero != 3) {
      getOperation().emitError()
          << "--par-autodiff prefetch=" << int64_t(prefetch)
          << " fetches ZeRO stage 3's parameter gathers ahead; it needs "
             "zero=3 (got zero="
          << int64_t(zero) << ")";
      return signalPassFailure();
    }
    // 0, 0B, 0MiB: no buckets.
    std::optional<int64_t> bucketBytes =
        parseByteSize(bucket, /*allowZero=*/true);
    if (!bucketBytes) {
      getOperation().emitError()
          << "--par-autodiff bucket '" << bucket
          << "' is not a size (25MiB, 4MB, a byte count, or 0 for none)";
      return signalPassFailure();
    }
    OptimizerConfig config{optimizer, lr,          momentum,   weightDecay,
                           beta1,     beta2,       epsilon,    clip,
                           warmup,    decaySteps,  minLrRatio, precision,
                           lossScale, scaleWindow, zero,       dataAxis};
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      if (failed(Differentiator(func, config).run()))
        return signalPassFailure();
      func->setAttr(ParDialect::kBucketBytesAttrName,
                    IntegerAttr::get(IntegerType::get(func.getContext(), 64),
                                     *bucketBytes));
      if (zero == 3 && prefetch > 0)
        func->setAttr(ParDialect::kPrefetchAttrName,
                      IntegerAttr::get(IntegerType::get(func.getContext(), 64),
                                       int64_t(prefetch)));
    }
  }
};
} // namespace
