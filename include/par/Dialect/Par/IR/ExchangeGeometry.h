//===- ExchangeGeometry.h - par.exchange's pieces from its IR ---*- C++ -*-===//
#ifndef PAR_DIALECT_PAR_IR_EXCHANGEGEOMETRY_H
#define PAR_DIALECT_PAR_IR_EXCHANGEGEOMETRY_H

#include "par/Catalogue/Exchange.h"
#include "par/Dialect/Par/IR/ParOps.h"

namespace mlir::par {
/// The geometry of a `par.exchange` (group axis sizes, global shape, both
/// layouts), or failure with `error` saying what is inconsistent.
FailureOr<::par::exchange::Geometry> getExchangeGeometry(ExchangeOp op,
                                                         std::string &error);

/// The busiest member's elements of an exchange
/// (::par::exchange::busiestMember), remembered per geometry: a model's
/// layers repeat the same exchanges, and the count visits every piece of
/// every member. Safe to call from several threads.
int64_t exchangeTraffic(const ::par::exchange::Geometry &geometry);
} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_EXCHANGEGEOMETRY_H
