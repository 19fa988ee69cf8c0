//===- ParConstants.cpp - Building par.constant values --------------------===//
#include "par/Dialect/Par/IR/ParConstants.h"

#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::par;

Value mlir::par::splatConstant(OpBuilder &builder, Location loc,
                               RankedTensorType type, double value) {
  Type elementType = type.getElementType();
  Attribute element;
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    element = builder.getFloatAttr(floatType, value);
  } else if (std::isinf(value)) {
    unsigned width = elementType.getIntOrFloatBitWidth();
    element = builder.getIntegerAttr(
        elementType, value < 0 ? APInt::getSignedMinValue(width)
                               : APInt::getSignedMaxValue(width));
  } else {
    element = builder.getIntegerAttr(elementType, (int64_t)value);
  }
  return ConstantOp::create(builder, loc, type,
                            DenseElementsAttr::get(type, element));
}

Value mlir::par::iotaConstant(OpBuilder &builder, Location loc, int64_t size,
                              Type elementType) {
  auto type = RankedTensorType::get({size}, elementType);
  SmallVector<APInt> values;
  for (int64_t i = 0; i < size; ++i)
    values.push_back(APInt(elementType.getIntOrFloatBitWidth(), i));
  return ConstantOp::create(builder, loc, type,
                            DenseElementsAttr::get(type, values));
}

bool mlir::par::isZeroSplat(Value value) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat())
    return false;
  Attribute element = attr.getSplatValue<Attribute>();
  if (auto f = dyn_cast<FloatAttr>(element))
    return f.getValue().isZero();
  if (auto i = dyn_cast<IntegerAttr>(element))
    return i.getValue().isZero();
  return false;
}
