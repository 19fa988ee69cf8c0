//===- ShardingRuleTest.cpp - factor mappings -----------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::par;

namespace {

class ShardingRuleTest : public ::testing::Test {
protected:
  ShardingRuleTest() { context.loadDialect<ParDialect, func::FuncDialect>(); }

  /// Parses `body` inside a function and returns its first op.
  Operation *firstOp(StringRef signature, StringRef body) {
    std::string text =
        "func.func @f" + signature.str() + " {\n" + body.str() + "\n}\n";
    module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module) << text;
    if (!module)
      return nullptr;
    auto func = *module->getOps<func::FuncOp>().begin();
    return &func.getBody().front().front();
  }

  std::string ruleOf(Operation *op) {
    ShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
    EXPECT_EQ(rule.check(op), "");
    std::string text;
    llvm::raw_string_ostream os(text);
    os << rule;
    return text;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(ShardingRuleTest, DotHasReductionFactor) {
  Operation *op = firstOp(
      "(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) -> tensor<8x64xf32>",
      "%y = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, "
      "tensor<16x64xf32>) -> tensor<8x64xf32>\nreturn %y : tensor<8x64xf32>");
  ShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
  ASSERT_EQ(rule.getNumFactors(), 3);
  EXPECT_EQ(rule.getFactor(2).kind, FactorKind::Reduction);
  EXPECT_EQ(rule.getFactor(2).combiner, FactorCombiner::Sum);
  EXPECT_EQ(rule.getFactor(2).size, 16);
  EXPECT_EQ(rule.getOperandMappings()[1][0], DimFactors{2});
  EXPECT_EQ(ruleOf(op), "([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16 "
                        "reduction(sum)}");
}

TEST_F(ShardingRuleTest, FlopsFromTheRule) {
  Operation *op = firstOp(
      "(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) -> tensor<8x64xf32>",
      "%y = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, "
      "tensor<16x64xf32>) -> tensor<8x64xf32>\nreturn %y : tensor<8x64xf32>");
  ShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
  // 2 M N K for the whole dot; split i 2-way and k 4-way: an eighth each;
  // an uneven split (i over 3) rounds up, as the padded shard computes.
  EXPECT_EQ(rule.flopsPerDevice(), 2 * 8 * 64 * 16);
  EXPECT_EQ(rule.flopsPerDevice({2, 1, 4}), 2 * 4 * 64 * 4);
  EXPECT_EQ(rule.pointsPerDevice({3, 1, 1}), 3 * 64 * 16);
  Operation *add = firstOp(
      "(%x: tensor<8x16xf32>) -> tensor<8x16xf32>",
      "%y = par.add %x, %x : tensor<8x16xf32>\nreturn %y : tensor<8x16xf32>");
  EXPECT_EQ(cast<ShardingRuleOpInterface>(add).getShardingRule().flopsPerDevice(),
            8 * 16);
}

TEST_F(ShardingRuleTest, ReshapeSplitsByGcd) {
  Operation *op =
      firstOp("(%x: tensor<6x4xf32>) -> tensor<4x6xf32>",
              "%y = par.reshape %x : (tensor<6x4xf32>) -> tensor<4x6xf32>\n"
              "return %y : tensor<4x6xf32>");
  // The major factor 2 is shared; the rest cannot be split consistently.
  EXPECT_EQ(ruleOf(op), "([ij, m]) -> ([ik, l]) {i=2, j=3 need-replication, "
                        "k=2 need-replication, l=6 need-replication, m=4 "
                        "need-replication}");
}

TEST_F(ShardingRuleTest, ReshapeMergeAndSizeOneDims) {
  Operation *op =
      firstOp("(%x: tensor<4x1x8xf32>) -> tensor<32xf32>",
              "%y = par.reshape %x : (tensor<4x1x8xf32>) -> tensor<32xf32>\n"
              "return %y : tensor<32xf32>");
  EXPECT_EQ(ruleOf(op), "([i, 1, j]) -> ([ij]) {i=4, j=8}");
}

TEST_F(ShardingRuleTest, CheckCatchesWrongSizes) {
  Operation *op = firstOp("(%x: tensor<8xf32>) -> tensor<8xf32>",
                          "%y = par.exp %x : tensor<8xf32>\n"
                          "return %y : tensor<8xf32>");
  ShardingRule rule(op);
  rule.addSharedFactor(4, {{0, 0}}, {{0, 0}});
  EXPECT_NE(rule.check(op).find("factors multiply to 4"), std::string::npos);

  ShardingRule unused(op);
  unused.addSharedFactor(8, {{0, 0}}, {{0, 0}});
  unused.addFactor(3);
  EXPECT_NE(unused.check(op).find("not used"), std::string::npos);

  ShardingRule reducedInResult(op);
  reducedInResult.addSharedFactor(8, {{0, 0}}, {{0, 0}}, FactorKind::Reduction,
                                  FactorCombiner::Sum);
  EXPECT_NE(reducedInResult.check(op).find("appears in a result"),
            std::string::npos);
}

TEST_F(ShardingRuleTest, ManyFactorsUseNumberedNames) {
  EXPECT_EQ(ShardingRule::factorName(0, 3), "i");
  EXPECT_EQ(ShardingRule::factorName(18, 26), "a");
  EXPECT_EQ(ShardingRule::factorName(27, 30), "f27");
}

} // namespace
