//===- ShardingRuleTest.cpp - factor mappings -----------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Transforms/ShardingGraph.h"

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

TEST_F(ShardingRuleTest, WorkWithTheOp) {
  Operation *op = firstOp(
      "(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) -> tensor<8x64xf32>",
      "%y = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, "
      "tensor<16x64xf32>) -> tensor<8x64xf32>\nreturn %y : tensor<8x64xf32>");
  auto dot = cast<ShardingRuleOpInterface>(op);
  ShardingRule rule = dot.getShardingRule();
  // 2 M N K for the whole dot, a matrix product; split i 2-way and k
  // 4-way: an eighth of the points each; an uneven split (i over 3) rounds
  // up, as the padded shard computes.
  EXPECT_EQ(dot.getWork().flops, 2.0 * 8 * 64 * 16);
  EXPECT_TRUE(dot.getWork().matmul);
  EXPECT_EQ(rule.pointsPerDevice({2, 1, 4}), 4 * 64 * 4);
  EXPECT_EQ(rule.pointsPerDevice({3, 1, 1}), 3 * 64 * 16);
  // Element-wise ops: the catalogue's FLOPs per element.
  Operation *add = firstOp(
      "(%x: tensor<8x16xf32>) -> tensor<8x16xf32>",
      "%y = par.add %x, %x : tensor<8x16xf32>\nreturn %y : tensor<8x16xf32>");
  EXPECT_EQ(cast<ShardingRuleOpInterface>(add).getWork().flops, 8.0 * 16);
  EXPECT_FALSE(cast<ShardingRuleOpInterface>(add).getWork().matmul);
  Operation *gelu = firstOp(
      "(%x: tensor<8x16xf32>) -> tensor<8x16xf32>",
      "%y = par.gelu %x : tensor<8x16xf32>\nreturn %y : tensor<8x16xf32>");
  EXPECT_EQ(cast<ShardingRuleOpInterface>(gelu).getWork().flops, 8.0 * 8 * 16);
  // Attention: B H S T (D + Dv) products of two FLOPs, grouped KV heads
  // included (q has 4 heads, k and v 2).
  Operation *attention = firstOp(
      "(%q: tensor<2x8x4x16xf32>, %k: tensor<2x6x2x16xf32>, %v: "
      "tensor<2x6x2x16xf32>) -> tensor<2x8x4x16xf32>",
      "%o = par.attention %q, %k, %v : tensor<2x8x4x16xf32>, "
      "tensor<2x6x2x16xf32>\nreturn %o : tensor<2x8x4x16xf32>");
  EXPECT_EQ(cast<ShardingRuleOpInterface>(attention).getWork().flops,
            2.0 * 2 * 4 * 8 * 6 * (16 + 16));
}

// A planner asks the sharding graph what an assignment of mesh axes to an
// op's factors would move, without changing the IR, and prices it.
TEST_F(ShardingRuleTest, GraphTellsWhatAnAssignmentImplies) {
  module = parseSourceString<ModuleOp>(R"mlir(
    par.mesh @mesh <["x"=2, "y"=2]>
    func.func @f(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>},
                 %b: tensor<16x4xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>})
        -> tensor<8x4xf32> {
      %c = par.dot %a, %b contract [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
      return %c : tensor<8x4xf32>
    })mlir",
                                       &context);
  ASSERT_TRUE(module);
  auto func = *module->getOps<func::FuncOp>().begin();
  Operation *dot = &func.getBody().front().front();
  propagation::ShardingGraph graph(*module);
  graph.build();
  // Factors of the dot: i (rows), j (columns), k (contracted). Splitting k
  // over y instead of i over x moves both operands.
  FailureOr<SmallVector<propagation::ImpliedReshard, 2>> moves =
      graph.impliedReshards(dot, {{}, {}, {1}});
  ASSERT_TRUE(succeeded(moves));
  ASSERT_EQ(moves->size(), 2u);
  EXPECT_EQ((*moves)[0].operand, 0u);
  EXPECT_EQ((*moves)[0].from.dims,
            (SmallVector<SmallVector<int32_t, 2>, 4>{{0}, {}}));
  EXPECT_EQ((*moves)[0].to.dims,
            (SmallVector<SmallVector<int32_t, 2>, 4>{{}, {1}}));
  EXPECT_EQ((*moves)[1].operand, 1u);
  EXPECT_EQ((*moves)[1].to.dims,
            (SmallVector<SmallVector<int32_t, 2>, 4>{{1}, {}}));
  // Priced without IR: the row-split a becomes column-split: one all_to_all.
  SmallVector<int64_t> sizes = graph.meshAxisSizes(dot);
  ReshardPlan plan;
  std::string error;
  ASSERT_TRUE(planReshard(sizes, {8, 16}, (*moves)[0].from, (*moves)[0].to,
                          plan, error))
      << error;
  ReshardCost cost = reshardCost(sizes, {8, 16}, 4, (*moves)[0].from, plan);
  EXPECT_GE(cost.collectives, 1);
  // Keeping i over x moves nothing; a wrong number of factors fails.
  moves = graph.impliedReshards(dot, {{0}, {}, {}});
  ASSERT_TRUE(succeeded(moves));
  EXPECT_TRUE(moves->empty());
  EXPECT_TRUE(failed(graph.impliedReshards(dot, {{0}})));
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
