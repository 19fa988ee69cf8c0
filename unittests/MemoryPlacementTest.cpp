//===- MemoryPlacementTest.cpp - placeBlocks against a plain scan ---------===//
//
// The memory plan places blocks with a time-indexed structure; these tests
// hold it to the definition: largest first, each at the lowest aligned
// offset that meets no earlier block taken at a common instruction,
// computed here by scanning every block placed before it.
//
//===----------------------------------------------------------------------===//

#include "par/Transforms/MemoryPlan.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <numeric>
#include <random>

using namespace mlir;
using namespace mlir::par;

namespace {

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// The definition, quadratic: try 0 and the aligned end of each earlier
/// block that shares an instruction, lowest first.
SmallVector<int64_t> reference(ArrayRef<PlacementRequest> blocks,
                               int64_t alignment) {
  SmallVector<unsigned> order(blocks.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    return blocks[a].bytes > blocks[b].bytes;
  });
  SmallVector<int64_t> offsets(blocks.size(), 0);
  SmallVector<unsigned> placed;
  for (unsigned id : order) {
    const PlacementRequest &block = blocks[id];
    if (!block.bytes)
      continue;
    SmallVector<unsigned> meeting;
    for (unsigned other : placed)
      if (blocks[other].first <= block.until &&
          block.first <= blocks[other].until)
        meeting.push_back(other);
    SmallVector<int64_t> tries{0};
    for (unsigned other : meeting)
      tries.push_back(alignUp(offsets[other] + blocks[other].bytes, alignment));
    llvm::sort(tries);
    for (int64_t at : tries) {
      bool free = llvm::none_of(meeting, [&](unsigned other) {
        return at < offsets[other] + blocks[other].bytes &&
               offsets[other] < at + block.bytes;
      });
      if (free) {
        offsets[id] = at;
        break;
      }
    }
    placed.push_back(id);
  }
  return offsets;
}

TEST(MemoryPlacement, DisjointInTimeShareAnOffset) {
  SmallVector<PlacementRequest> blocks{{100, 0, 3}, {100, 4, 7}, {50, 2, 5}};
  EXPECT_EQ(placeBlocks(blocks, 64), (SmallVector<int64_t>{0, 0, 128}));
}

TEST(MemoryPlacement, FillsTheLowestGapThatFits) {
  // Largest first: 2 at 0; 4 (65 bytes) above it at 128; 0 above 4, at the
  // aligned end 256; 1 does not meet 4 in time and takes 128; 3 meets 2, 4
  // and 0, so the first offset free of all three is 320.
  SmallVector<PlacementRequest> blocks{
      {64, 0, 9}, {64, 0, 1}, {128, 0, 9}, {64, 5, 6}, {65, 5, 6}};
  EXPECT_EQ(placeBlocks(blocks, 64),
            (SmallVector<int64_t>{256, 128, 0, 320, 128}));
  EXPECT_EQ(placeBlocks(blocks, 64), reference(blocks, 64));
}

TEST(MemoryPlacement, ZeroBytesTakeNothing) {
  SmallVector<PlacementRequest> blocks{{0, 0, 5}, {8, 0, 5}, {0, 2, 2}};
  EXPECT_EQ(placeBlocks(blocks, 64), (SmallVector<int64_t>{0, 0, 0}));
}

TEST(MemoryPlacement, EqualsTheDefinitionOnRandomBlocks) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t times = 1 + int64_t(random() % 300);
    int64_t count = 1 + int64_t(random() % 400);
    int64_t alignment = int64_t(1) << (random() % 8);
    SmallVector<PlacementRequest> blocks;
    for (int64_t i = 0; i < count; ++i) {
      int64_t first = int64_t(random() % times);
      int64_t length =
          random() % 4 == 0 ? int64_t(random() % times) : int64_t(random() % 8);
      int64_t until = std::min(times - 1, first + length);
      static const int64_t sizes[] = {0, 1, 7, 64, 100, 4096};
      int64_t bytes =
          random() % 2 ? sizes[random() % 6] : 1 + int64_t(random() % 100000);
      blocks.push_back({bytes, first, until});
    }
    ASSERT_EQ(placeBlocks(blocks, alignment), reference(blocks, alignment))
        << "trial " << trial;
  }
}

} // namespace
