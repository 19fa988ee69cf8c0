//===- MixedPrecision.cpp - The forward pass in bf16 or fp16 --------------===//
//
// Every fp32 argument is converted once at the top (marked as the working
// copy of its master), every fp32 value becomes the low type, and the loss
// is converted back; the gradient of a master is its copy's.
//
//===----------------------------------------------------------------------===//
#include "Differentiator.h"

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::autodiff;

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
    // The working copy of a master weight (data is only converted).
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  ParDialect::kRoleAttrName);
    if (!role || role.getValue() == "param")
      setCopyOf(copy, arg.getArgNumber());
    arg.replaceAllUsesExcept(copy.getResult(), copy);
    lowCopies[arg] = copy.getResult();
    copyOps.insert(copy);
  }
  const llvm::fltSemantics &semantics = low.getFloatSemantics();
  SmallVector<CrossEntropyOp> keptLosses;
  for (Operation &op : body.without_terminator()) {
    if (copyOps.contains(&op))
      continue;
    auto attention = dyn_cast<AttentionOp>(op);
    // A cross-entropy's loss stays f32 (kept to the digits an f32 holds,
    // as the f32 program's); other ops read it converted.
    if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
      if (loss.getResult().getType() != lowType(loss.getResult().getType()))
        keptLosses.push_back(loss);
      continue;
    }
    for (OpResult result : op.getResults())
      // Attention's row statistics stay f32 (its verifier says so).
      if (!attention || result != attention.getStats())
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
  for (CrossEntropyOp op : keptLosses) {
    Value f32 = op.getResult();
    Value converted;
    for (OpOperand &use : llvm::make_early_inc_range(f32.getUses())) {
      if (use.getOwner() == ret)
        continue;
      if (!converted) {
        b.setInsertionPointAfter(op);
        converted =
            ConvertOp::create(b, op.getLoc(), lowType(f32.getType()), f32);
      }
      use.set(converted);
    }
  }
  b.setInsertionPoint(ret);
  Value loss32 = loss;
  if (typeOf(loss).getElementType() == low)
    loss32 = ConvertOp::create(b, ret.getLoc(),
                               RankedTensorType::get({}, b.getF32Type()), loss);
  ret.setOperand(0, loss32);
  return loss32;
}
