//===- ShardingAttrTest.cpp - #par.sharding -------------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::par;

namespace {

TEST(ShardingAttr, ParsesAndExposesFields) {
  MLIRContext context;
  context.loadDialect<ParDialect>();
  auto attr = dyn_cast_or_null<ShardingAttr>(
      parseAttribute("#par.sharding<@mesh, [{\"dp\"}p0, {\"tp\", ?}, {}], "
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

namespace {

TEST(ShardingAttr, ResultShardingHelpers) {
  MLIRContext context;
  context.loadDialect<ParDialect, func::FuncDialect>();
  const char *text = R"mlir(
    par.mesh @mesh <["dp"=2, "tp"=4]>
    func.func @f(%p: tensor<8x4xf32>, %lr: tensor<f32>) {
      %a, %b = par.sgd %p, %p, %p, %lr : tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>
      return
    }
  )mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  MeshOp mesh = *module->getOps<MeshOp>().begin();
  EXPECT_EQ(mesh.getNumDevices(), 8);
  EXPECT_EQ(mesh.getAxisIndex("tp"), 1);
  EXPECT_EQ(mesh.getAxisIndex("pp"), -1);
  EXPECT_EQ(mesh.getAxisSize("tp"), 4);

  Operation *sgd = nullptr;
  module->walk([&](SgdOp op) { sgd = op; });
  ASSERT_TRUE(sgd);
  EXPECT_FALSE(getResultSharding(sgd, 0));

  auto sharding = cast<ShardingAttr>(
      parseAttribute("#par.sharding<@mesh, [{\"dp\"}, {}]>", &context));
  setResultSharding(sgd, 1, sharding);
  // The other result gets an open sharding so the list stays complete.
  EXPECT_EQ(getResultSharding(sgd, 1), sharding);
  ShardingAttr other = getResultSharding(sgd, 0);
  ASSERT_TRUE(other);
  EXPECT_TRUE(other.isFullyReplicated());
  EXPECT_TRUE(other.getDims()[0].isOpen());
  EXPECT_TRUE(succeeded(verify(*module)));

  // A sharding whose axis the mesh lacks fails verification.
  auto bad = cast<ShardingAttr>(
      parseAttribute("#par.sharding<@mesh, [{\"pp\"}, {}]>", &context));
  setResultSharding(sgd, 0, bad);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_NE(message.find("unknown axis \"pp\""), std::string::npos) << message;
}

} // namespace
