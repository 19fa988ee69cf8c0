//===- PipelineScheduleTest.cpp - Pipeline schedules and their bubbles ----===//
//
// simulateSchedule against the closed forms that hold with equal stages:
// GPipe and 1F1B leave (p-1)/m, interleaving with v chunks (p-1)/(v*m);
// zb-h1 leaves Qi et al.'s (p-1)(F+B-W)/(m(F+B+W)) or less, holding no
// more micro-batches than 1F1B's first stage; every schedule runs
// each slot exactly once and never a backward before its forward.
//
//===----------------------------------------------------------------------===//

#include "par/Transforms/Pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

using namespace mlir::par;

namespace {

PipelineInfo info(const char *schedule, int64_t p, int64_t m, int64_t v = 1) {
  PipelineInfo i;
  i.axis = "pp";
  i.stages = p;
  i.microbatches = m;
  i.schedule = schedule;
  i.virtualStages = v;
  return i;
}

/// Every virtual stage: forward f, backward b, weight gradients w.
SlotTimes uniform(const PipelineInfo &i, double f, double b, double w = 0) {
  SlotTimes t(i.chunks());
  for (int64_t c = 0; c < i.chunks(); ++c) {
    t.forward[c] = f;
    t.backward[c] = b;
    t.weight[c] = w;
  }
  return t;
}

/// Each device runs each of its slots once, F before B before W.
void expectComplete(const PipelineInfo &i, const ScheduleTimes &times,
                    bool weights) {
  ASSERT_EQ(int64_t(times.slots.size()), i.stages);
  for (int64_t d = 0; d < i.stages; ++d) {
    std::set<std::tuple<int, int64_t, int64_t>> seen;
    for (const PipelineSlot &slot : times.slots[d]) {
      EXPECT_EQ(i.deviceOf(slot.chunk), d);
      EXPECT_TRUE(
          seen.insert({int(slot.kind), slot.microbatch, slot.chunk}).second);
      if (slot.kind != SlotKind::F)
        EXPECT_TRUE(
            seen.count({int(SlotKind::F), slot.microbatch, slot.chunk}));
      if (slot.kind == SlotKind::W)
        EXPECT_TRUE(
            seen.count({int(SlotKind::B), slot.microbatch, slot.chunk}));
    }
    int64_t kinds = weights ? 3 : 2;
    EXPECT_EQ(int64_t(seen.size()), kinds * i.microbatches * i.virtualStages);
  }
}

TEST(PipelineSchedule, GPipeAndOneFOneBLeavePMinusOneOverM) {
  for (const char *schedule : {"gpipe", "1f1b"})
    for (int64_t p : {2, 4})
      for (int64_t m : {4, 8, 16}) {
        PipelineInfo i = info(schedule, p, m);
        ScheduleTimes t = simulateSchedule(i, uniform(i, 1.0, 2.0));
        expectComplete(i, t, false);
        EXPECT_NEAR(t.bubble, double(p - 1) / double(m), 1e-12)
            << schedule << " p=" << p << " m=" << m;
        EXPECT_NEAR(formulaBubble(i, uniform(i, 1.0, 2.0)),
                    double(p - 1) / double(m), 1e-12);
      }
}

TEST(PipelineSchedule, OneFOneBWarmsUpWithTheStagesAfter) {
  PipelineInfo i = info("1f1b", 4, 8);
  ScheduleTimes t = simulateSchedule(i, uniform(i, 1.0, 2.0));
  for (int64_t d = 0; d < 4; ++d) {
    // p - d - 1 forwards, then a forward and the first backward.
    int64_t warmup = 4 - d - 1;
    for (int64_t k = 0; k <= warmup; ++k)
      EXPECT_EQ(t.slots[d][size_t(k)].kind, SlotKind::F);
    EXPECT_EQ(t.slots[d][size_t(warmup + 1)].kind, SlotKind::B);
  }
}

TEST(PipelineSchedule, InterleavingDividesTheBubbleByV) {
  for (int64_t p : {2, 4})
    for (int64_t m : {4, 8, 16}) {
      PipelineInfo i = info("interleaved", p, m, 2);
      // The same model cut twice as fine: half the time per chunk.
      ScheduleTimes t = simulateSchedule(i, uniform(i, 0.5, 1.0));
      expectComplete(i, t, false);
      EXPECT_NEAR(t.bubble, double(p - 1) / double(2 * m), 1e-12)
          << "p=" << p << " m=" << m;
      EXPECT_NEAR(formulaBubble(i, uniform(i, 0.5, 1.0)),
                  double(p - 1) / double(2 * m), 1e-12);
    }
}

TEST(PipelineSchedule, ZeroBubbleFillsTheGapsWithWeightGradients) {
  for (int64_t p : {2, 4})
    for (int64_t m : {4, 8, 16}) {
      PipelineInfo zb = info("zb-h1", p, m), plain = info("1f1b", p, m);
      ScheduleTimes t = simulateSchedule(zb, uniform(zb, 1.0, 1.0, 1.0));
      expectComplete(zb, t, true);
      double oneFOneB =
          simulateSchedule(plain, uniform(plain, 1.0, 2.0)).bubble;
      EXPECT_LT(t.bubble, oneFOneB) << "p=" << p << " m=" << m;
      // Qi et al.: (p-1)(F+B-W) / (m(F+B+W)) = (p-1)/(3m) here.
      EXPECT_NEAR(formulaBubble(zb, uniform(zb, 1.0, 1.0, 1.0)),
                  double(p - 1) / double(3 * m), 1e-12);
      EXPECT_LE(t.bubble, double(p - 1) / double(3 * m) + 1e-12)
          << "p=" << p << " m=" << m;
    }
}

TEST(PipelineSchedule, ZeroBubbleHoldsNoMoreThanOneFOneBsPeak) {
  // A micro-batch's inputs are kept from its F to its W: never more than p
  // on any device, what 1F1B keeps on its first stage.
  for (int64_t m : {4, 8, 16}) {
    PipelineInfo i = info("zb-h1", 4, m);
    ScheduleTimes t = simulateSchedule(i, uniform(i, 1.0, 1.0, 1.0));
    for (int64_t d = 0; d < 4; ++d) {
      int64_t held = 0, most = 0;
      for (const PipelineSlot &slot : t.slots[d]) {
        held += slot.kind == SlotKind::F   ? 1
                : slot.kind == SlotKind::W ? -1
                                           : 0;
        most = std::max(most, held);
      }
      EXPECT_LE(most, 4) << "device " << d << " m=" << m;
      EXPECT_EQ(held, 0);
    }
  }
}

TEST(PipelineSchedule, ShareOfTheStepIsTheSchedulesLengthOverTheWork) {
  // Balanced stages under 1f1b: (1 + (p-1)/m)/p of the step's work, the
  // share --auto-shard estimated every pipeline with before.
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {4, 8, 16}) {
      PipelineInfo i = info("1f1b", p, m);
      EXPECT_NEAR(scheduledShare(i, uniform(i, 1.0, 2.0)),
                  (1 + double(p - 1) / double(m)) / double(p), 1e-12)
          << "p=" << p << " m=" << m;
      // Interleaved with the same work per device (micro-batches in
      // groups of p): a smaller share, by the bubble it halves.
      PipelineInfo v = info("interleaved", p, m, 2);
      if (m % p == 0)
        EXPECT_NEAR(scheduledShare(v, uniform(v, 0.5, 1.0)),
                    (1 + double(p - 1) / double(2 * m)) / double(p), 1e-12);
      // zb-h1 no more than its formula's bubble (with m >= p, as
      // --auto-shard's micro-batch counts are).
      PipelineInfo zb = info("zb-h1", p, m);
      if (m >= p)
        EXPECT_LE(scheduledShare(zb, uniform(zb, 1.0, 1.0, 1.0)),
                  (1 + double(p - 1) / double(3 * m)) / double(p) + 1e-12);
    }
  // An uneven stage: the step waits for the busiest device, so the share
  // grows with its work (here 3 of the 4 units on stage 1 of 2).
  PipelineInfo i = info("1f1b", 2, 8);
  SlotTimes uneven(2);
  uneven.forward = {1.0 / 3, 2.0 / 3};
  uneven.backward = {2.0 / 3, 4.0 / 3};
  double busiest = 2.0 * 8, total = 3.0 * 8;
  EXPECT_GE(scheduledShare(i, uneven), busiest / total);
  EXPECT_GT(scheduledShare(i, uneven), scheduledShare(i, uniform(i, 0.5, 1.0)));
  // No work: an even share of the stages.
  EXPECT_DOUBLE_EQ(scheduledShare(i, SlotTimes(2)), 0.5);
}

} // namespace
