//===- MeshSpecTest.cpp - --mesh value parsing ----------------------------===//
#include "par/Dialect/Par/IR/MeshSpec.h"

#include <gtest/gtest.h>

using namespace mlir::par;

namespace {

std::vector<MeshAxisSpec> parseOk(const std::string &spec) {
  std::vector<MeshAxisSpec> axes;
  std::string error;
  EXPECT_TRUE(parseMeshSpec(spec, axes, error)) << spec << ": " << error;
  return axes;
}

std::string parseError(const std::string &spec) {
  std::vector<MeshAxisSpec> axes;
  std::string error;
  EXPECT_FALSE(parseMeshSpec(spec, axes, error)) << spec;
  return error;
}

TEST(MeshSpec, PositionalGetsDefaultNames) {
  std::vector<MeshAxisSpec> axes = parseOk("4x4x2");
  ASSERT_EQ(axes.size(), 3u);
  EXPECT_EQ(axes[0].name, "x");
  EXPECT_EQ(axes[1].name, "y");
  EXPECT_EQ(axes[2].name, "z");
  EXPECT_EQ(axes[0].size, 4);
  EXPECT_EQ(axes[2].size, 2);
}

TEST(MeshSpec, SingleAxis) {
  std::vector<MeshAxisSpec> axes = parseOk("8");
  ASSERT_EQ(axes.size(), 1u);
  EXPECT_EQ(axes[0].name, "x");
  EXPECT_EQ(axes[0].size, 8);
}

TEST(MeshSpec, ManyPositionalAxesAreNumbered) {
  std::vector<MeshAxisSpec> axes = parseOk("2x2x2x2x2");
  ASSERT_EQ(axes.size(), 5u);
  EXPECT_EQ(axes[0].name, "a0");
  EXPECT_EQ(axes[4].name, "a4");
}

TEST(MeshSpec, NamedKeepsOrder) {
  std::vector<MeshAxisSpec> axes = parseOk("dp=2,tp=4,pp=4");
  ASSERT_EQ(axes.size(), 3u);
  EXPECT_EQ(axes[0].name, "dp");
  EXPECT_EQ(axes[1].name, "tp");
  EXPECT_EQ(axes[2].name, "pp");
  EXPECT_EQ(axes[1].size, 4);
}

TEST(MeshSpec, Errors) {
  EXPECT_NE(parseError("").find("empty mesh"), std::string::npos);
  EXPECT_NE(parseError("4xx2").find("'' is not a positive integer"),
            std::string::npos);
  EXPECT_NE(parseError("4x0").find("'0' is not a positive integer"),
            std::string::npos);
  EXPECT_NE(parseError("4x-2").find("'-2'"), std::string::npos);
  EXPECT_NE(parseError("dp=2,dp=4").find("given twice"), std::string::npos);
  EXPECT_NE(parseError("dp=2,tp").find("name=size"), std::string::npos);
  EXPECT_NE(parseError("dp=0").find("positive"), std::string::npos);
  EXPECT_NE(parseError("2dp=2").find("not a valid axis name"),
            std::string::npos);
  EXPECT_NE(parseError("dp=2,4").find("name=size"), std::string::npos);
  EXPECT_NE(parseError("65536x65536").find("2^20"), std::string::npos);
  EXPECT_NE(parseError("1024x1025").find("2^20"), std::string::npos);
  EXPECT_EQ(parseOk("1024x1024").size(), 2u);
  // The product is checked before it can overflow.
  EXPECT_NE(parseError("999999999x999999999x999999999").find("2^20"),
            std::string::npos);
}

} // namespace
