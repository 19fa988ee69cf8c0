//===- TestShardingRules.cpp - report every op's sharding rule ------------===//
#include "par/Transforms/Passes.h"

#define DEBUG_TYPE "par-test-sharding-rules"

namespace mlir::par {
#define GEN_PASS_DEF_TESTSHARDINGRULESPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct TestShardingRulesPass
    : public par::impl::TestShardingRulesPassBase<TestShardingRulesPass> {
  void runOnOperation() override {
    bool failed = false;
    getOperation()->walk([&](Operation *op) {
      if (!isa<ParDialect>(op->getDialect()))
        return;
      auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
      if (!ruleOp) {
        op->emitRemark() << "no sharding rule";
        return;
      }
      ShardingRule rule = ruleOp.getShardingRule();
      std::string problem = rule.check(op);
      if (!problem.empty()) {
        op->emitError() << "invalid sharding rule " << rule.str() << ": "
                        << problem;
        failed = true;
        return;
      }
      op->emitRemark() << "sharding rule: " << rule.str();
    });
    if (failed)
      signalPassFailure();
  }
};
} // namespace
