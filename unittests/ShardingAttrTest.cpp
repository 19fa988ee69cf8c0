//===- ShardingAttrTest.cpp - #par.sharding --------------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/AsmParser/AsmParser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::par;

namespace {

TEST(ShardingAttr, ParsesAndExposesFields) {
  MLIRContext context;
  context.loadDialect<ParDialect>();
  auto attr = dyn_cast_or_null<ShardingAttr>(parseAttribute(
      "#par.sharding<@mesh, [{\"dp\"}p0, {\"tp\", ?}, {}], "
      "replicated={\"pp\"}>",
      &context));
  ASSERT_TRUE(attr);
  EXPECT_EQ(attr.getMesh().getValue(), "mesh");
  ASSERT_EQ(attr.getRank(), 3);
  EXPECT_TRUE(attr.getDims()[0].getIsClosed());
  EXPECT_EQ(attr.getDims()[0].getPriority(), std::optional<int64_t>(0));
  EXPECT_TRUE(attr.getDims()[1].isOpen());
  EXPECT_FALSE(attr.getDims()[1].getPriority().has_value());
  EXPECT_EQ(attr.getShardingAxes().size(), 2u);
  EXPECT_EQ(attr.getReplicatedAxes().size(), 1u);
  EXPECT_FALSE(attr.isFullyReplicated());
}

TEST(ShardingAttr, UniquedByValue) {
  MLIRContext context;
  context.loadDialect<ParDialect>();
  Attribute a = parseAttribute("#par.sharding<@m, [{\"x\"}, {?}]>", &context);
  Attribute b = parseAttribute("#par.sharding<@m, [{\"x\"}, {?}]>", &context);
  Attribute c = parseAttribute("#par.sharding<@m, [{\"x\"}, {}]>", &context);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(ShardingAttr, RejectsAxisUsedTwice) {
  MLIRContext context;
  context.loadDialect<ParDialect>();
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  Attribute attr =
      parseAttribute("#par.sharding<@m, [{\"x\"}, {\"x\"}]>", &context);
  EXPECT_FALSE(attr);
  EXPECT_NE(message.find("axis \"x\" is used twice"), std::string::npos)
      << message;
}

} // namespace
