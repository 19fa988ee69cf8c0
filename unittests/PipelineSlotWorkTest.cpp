//===- PipelineSlotWorkTest.cpp - A pipelined step's slot work
//-------------===//
//
// stepSlotWork measures a step's slot times in one walk, for the schedules
// whose backward ops all run in B slots and for zb-h1: each table must be
// what --par-schedule measures (addSlotWork on every op, after
// markWeightGradients for the schedule), and an op's cost must land in the
// slot its marks and zb-h1's B/W split give it.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace mlir::par;

namespace {

/// Two stages, two micro-batches. Per micro-batch: stage 0 multiplies by
/// w1, stage 1 by w2 and sums; backward, stage 1 negates the sum's input,
/// makes the input gradient stage 0 reads (B under zb-h1) and w2's
/// gradient (W), and stage 0 makes w1's gradient (W).
std::string step() {
  std::string text = R"mlir(
par.mesh @mesh <["pp"=2]>
func.func @step(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>,
                %w2: tensor<8x8xf32>) -> tensor<f32> attributes {par.pipeline = {axis = "pp", first_layers = array<i64: 0, 1>, microbatches = 2 : i64, schedule = "1f1b", stages = 2 : i64}} {
)mlir";
  for (std::string mb : {"0", "1"}) {
    auto marks = [&](const char *phase, const char *stage, const char *layer) {
      return std::string("{par.layer = ") + layer + ", par.microbatch = " + mb +
             " : i64, par.phase = #par.phase<" + phase +
             ">, par.stage = " + stage + " : i64}";
    };
    text += "  %h" + mb + " = par.dot %x, %w1 contract [1] x [0] " +
            marks("forward", "0", "0") +
            " : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>\n";
    text += "  %y" + mb + " = par.dot %h" + mb + ", %w2 contract [1] x [0] " +
            marks("forward", "1", "1") +
            " : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>\n";
    text += "  %l" + mb + " = par.reduce sum %y" + mb + " dims [0, 1] " +
            marks("forward", "1", "1") +
            " : (tensor<4x8xf32>) -> tensor<f32>\n";
    text += "  %dy" + mb + " = par.neg %y" + mb + " " +
            marks("backward", "1", "1") + " : tensor<4x8xf32>\n";
    text += "  %dh" + mb + " = par.dot %dy" + mb + ", %w2 contract [1] x [1] " +
            marks("backward", "1", "1") +
            " : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>\n";
    text += "  %dw2" + mb + " = par.dot %h" + mb + ", %dy" + mb +
            " contract [0] x [0] " + marks("backward", "1", "1") +
            " : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>\n";
    text += "  %dw1" + mb + " = par.dot %x, %dh" + mb + " contract [0] x [0] " +
            marks("backward", "0", "0") +
            " : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>\n";
  }
  text += "  return %l0 : tensor<f32>\n}\n";
  return text;
}

/// What --par-schedule measures under `schedule`: every op's FLOPs added
/// to its slot once the weight gradients are marked for that schedule.
SlotTimes scheduled(func::FuncOp func, PipelineInfo info,
                    const char *schedule) {
  info.schedule = schedule;
  markWeightGradients(func, info);
  SlotTimes times(info.chunks());
  func.walk([&](Operation *op) { addSlotWork(op, info, times); });
  markWeightGradients(func, PipelineInfo());
  return times;
}

void expectSame(const SlotTimes &a, const SlotTimes &b) {
  EXPECT_EQ(a.forward, b.forward);
  EXPECT_EQ(a.backward, b.backward);
  EXPECT_EQ(a.weight, b.weight);
}

TEST(PipelineSlotWork, OneWalkMeasuresWhatTheScheduleDoes) {
  MLIRContext context;
  context.loadDialect<ParDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(step(), &context);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("step");
  std::optional<PipelineInfo> info = getPipeline(func);
  ASSERT_TRUE(info);

  // Each op costs one: a slot's cost is its ops per micro-batch.
  StepSlotWork work = stepSlotWork(
      func, *info, [](Operation *) { return 1.0; }, /*withZeroBubble=*/true);
  expectSame(work.flops, scheduled(func, *info, "1f1b"));
  expectSame(work.zeroBubbleFlops, scheduled(func, *info, "zb-h1"));
  EXPECT_GT(work.zeroBubbleFlops.weight[0], 0.0);
  EXPECT_GT(work.zeroBubbleFlops.weight[1], 0.0);

  // Stage 0: one forward op; backward, w1's gradient. Stage 1: two forward
  // ops; backward the negation, the input gradient and w2's gradient.
  EXPECT_EQ(work.cost.forward, (SmallVector<double>{1, 2}));
  EXPECT_EQ(work.cost.backward, (SmallVector<double>{1, 3}));
  EXPECT_EQ(work.cost.weight, (SmallVector<double>{0, 0}));
  EXPECT_EQ(work.zeroBubbleCost.forward, (SmallVector<double>{1, 2}));
  EXPECT_EQ(work.zeroBubbleCost.backward, (SmallVector<double>{0, 2}));
  EXPECT_EQ(work.zeroBubbleCost.weight, (SmallVector<double>{1, 1}));

  // Without zb-h1, its tables stay empty.
  StepSlotWork plain = stepSlotWork(
      func, *info, [](Operation *) { return 1.0; }, /*withZeroBubble=*/false);
  expectSame(plain.flops, work.flops);
  EXPECT_TRUE(plain.zeroBubbleFlops.forward.empty());
  EXPECT_TRUE(plain.zeroBubbleCost.weight.empty());
}

} // namespace
