//===- RuntimeProgramTest.cpp - Program loader, mesh helpers, RNG ---------===//
//
// parseProgram is the only gate between a program file and the executor, so
// every error must point at the offending field: each error test breaks one
// field of a known-good program and checks the message names the file and
// that field's exact path. The mesh helpers and piece packing are checked
// against references written as plain enumeration loops here.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Bubble.h"
#include "par/Runtime/Collectives.h"
#include "par/Runtime/Comm/CollectiveWatch.h"
#include "par/Runtime/Executor.h"
#include "par/Runtime/Program.h"
#include "par/Runtime/Rng.h"

#include <gmock/gmock-matchers.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <set>

using namespace par::rt;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

//===----------------------------------------------------------------------===//
// A small valid program
//===----------------------------------------------------------------------===//

// dp=2 x tp=2, one rank class. Buffers 10-14 reuse arena bytes of buffers
// whose live ranges do not meet theirs (14 straddles the tail of 9, live
// later), so the overlap check must accept them.
// Input 7 is bound to no buffer on this class (-1).
const char *kProgram = R"json({
  "format": "par-program",
  "version": 1,
  "function": "toy",
  "mesh": {"name": "mesh", "axes": [{"name": "dp", "size": 2},
                                    {"name": "tp", "size": 2}]},
  "num_ranks": 4,
  "groups": [["tp"]],
  "memory": {"alignment": 64},
  "inputs": [
    {"name": "x", "role": "data", "data": "random", "dtype": "f32",
     "global_shape": [4, 8], "sharding": {"dims": [["dp"], []], "partial": []}},
    {"name": "ids", "role": "data", "data": "tokens", "vocab": 50, "dtype": "i32",
     "global_shape": [4, 6], "sharding": {"dims": [["dp"], []]}},
    {"name": "w", "role": "param", "init": {"kind": "normal", "std": 0.1},
     "dtype": "f32", "global_shape": [8, 6], "sharding": {"dims": [[], ["tp"]]}},
    {"name": "lr", "role": "param", "init": {"kind": "constant", "value": 2.5},
     "dtype": "f32", "global_shape": [], "sharding": {"dims": []}},
    {"name": "bias", "role": "param",
     "init": {"kind": "uniform", "low": -1, "high": 2},
     "dtype": "f32", "global_shape": [6], "sharding": {"dims": [["tp"]]}},
    {"name": "m", "role": "param", "init": {"kind": "zeros"},
     "dtype": "f32", "global_shape": [8, 6], "sharding": {"dims": [[], ["tp"]]}},
    {"name": "labels", "role": "data", "data": "targets", "vocab": 7,
     "dtype": "i64", "global_shape": [4], "sharding": {"dims": [["dp"]]}},
    {"name": "g", "role": "param", "init": {"kind": "ones"},
     "dtype": "bf16", "global_shape": [4], "sharding": {"dims": [[]]}}
  ],
  "outputs": [
    {"name": "y", "dtype": "f32", "global_shape": [4, 6],
     "sharding": {"dims": [["dp"], ["tp"]]}},
    {"name": "w_new", "dtype": "f32", "global_shape": [8, 6],
     "sharding": {"dims": [[], ["tp"]]}, "updates": "w"},
    {"name": "loss", "dtype": "f32", "global_shape": [],
     "sharding": {"dims": [], "partial": ["dp"]}}
  ],
  "rank_classes": [{
    "ranks": [0, 1, 2, 3],
    "arena_bytes": 928,
    "peak_live_bytes": 900,
    "buffers": [
      {"name": "x", "dtype": "f32", "shape": [2, 8], "offset": 0, "bytes": 64, "live": [0, 0]},
      {"name": "ids", "dtype": "i32", "shape": [2, 6], "offset": 64, "bytes": 48, "live": [0, 0]},
      {"name": "w", "dtype": "f32", "shape": [8, 3], "offset": 128, "bytes": 96, "live": [0, 7]},
      {"name": "lr", "dtype": "f32", "shape": [], "offset": 256, "bytes": 4, "live": [0, 7]},
      {"name": "bias", "dtype": "f32", "shape": [3], "offset": 320, "bytes": 12, "live": [0, 3]},
      {"name": "m", "dtype": "f32", "shape": [8, 3], "offset": 384, "bytes": 96, "live": [0, 7]},
      {"name": "labels", "dtype": "i64", "shape": [2], "offset": 512, "bytes": 16, "live": [0, 0]},
      {"name": "xw", "dtype": "f32", "shape": [2, 3], "offset": 576, "bytes": 24, "live": [0, 2]},
      {"name": "y", "dtype": "f32", "shape": [2, 3], "offset": 640, "bytes": 24, "live": [4, 8]},
      {"name": "w_new", "dtype": "f32", "shape": [8, 3], "offset": 704, "bytes": 96, "live": [7, 8]},
      {"name": "loss", "dtype": "f32", "shape": [], "offset": 0, "bytes": 4, "live": [6, 8]},
      {"dtype": "f32", "shape": [2, 3], "offset": 64, "bytes": 24, "live": [1, 2]},
      {"dtype": "f32", "shape": [2, 3], "offset": 512, "bytes": 24, "live": [2, 3]},
      {"dtype": "f32", "shape": [2, 3], "offset": 576, "bytes": 24, "live": [3, 4]},
      {"dtype": "f32", "shape": [2, 3], "offset": 768, "bytes": 24, "live": [5, 6]},
      {"dtype": "f32", "shape": [8, 3], "offset": 832, "bytes": 96, "live": [7, 8]}
    ],
    "inputs": [0, 1, 2, 3, 4, 5, 6, -1],
    "outputs": [8, 9, 10],
    "instructions": [
      {"op": "dot", "operands": [0, 2], "results": [7], "loc": "toy.mlir:3:10",
       "attrs": {"lhs_contract": [1], "rhs_contract": [0]}},
      {"op": "broadcast", "operands": [3], "results": [11], "attrs": {"dims": []}},
      {"op": "mul", "operands": [7, 11], "results": [12]},
      {"op": "layer_norm", "operands": [12, 4, 4], "results": [13],
       "attrs": {"epsilon": 0.001}},
      {"op": "all_reduce", "operands": [13], "results": [8],
       "attrs": {"kind": "sum", "group": 0}},
      {"op": "collective_permute", "operands": [8], "results": [14],
       "attrs": {"group": 0, "pairs": [[0, 1], [1, 0]]}},
      {"op": "reduce", "operands": [14], "results": [10],
       "attrs": {"kind": "mean", "dims": [0, 1]}},
      {"op": "sgd", "operands": [2, 5, 5, 3], "results": [9, 15],
       "attrs": {"momentum": 0.9, "nesterov": true}}
    ]
  }]
})json";

const char *kFile = "toy.json";

json baseDoc() { return json::parse(kProgram); }

/// The message of the ProgramError parsing `text` throws (a failure if none).
std::string errorOf(const std::string &text) {
  try {
    parseProgram(text, kFile);
  } catch (const ProgramError &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ProgramError";
  return "";
}

/// The error after `edit` breaks one field of the valid program.
std::string errorAfter(const std::function<void(json &)> &edit) {
  json doc = baseDoc();
  edit(doc);
  return errorOf(doc.dump());
}

/// "toy.json: <field>: ..." pins both the file and the exact field path.
::testing::Matcher<std::string> names(const std::string &field,
                                      const std::string &what) {
  return AllOf(HasSubstr(std::string(kFile) + ": " + field + ": "),
               HasSubstr(what));
}

json &cls(json &doc) { return doc["rank_classes"][0]; }

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

TEST(ProgramParse, DecodesHeaderMeshAndGroups) {
  Program p = parseProgram(kProgram, kFile);
  EXPECT_EQ(p.path, kFile);
  EXPECT_EQ(p.function, "toy");
  ASSERT_EQ(p.mesh.size(), 2u);
  EXPECT_EQ(p.mesh[0].name, "dp");
  EXPECT_EQ(p.mesh[0].size, 2);
  EXPECT_EQ(p.mesh[1].name, "tp");
  EXPECT_EQ(p.mesh[1].size, 2);
  EXPECT_EQ(p.numRanks, 4);
  EXPECT_EQ(p.axisIndex("dp"), 0);
  EXPECT_EQ(p.axisIndex("tp"), 1);
  EXPECT_EQ(p.axisIndex("pp"), -1);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0], std::vector<std::string>{"tp"});
  EXPECT_EQ(p.alignment, 64);
  ASSERT_EQ(p.rankClasses.size(), 1u);
  EXPECT_EQ(&p.classOf(3), &p.rankClasses[0]);
  EXPECT_THROW(p.classOf(4), ProgramError);
}

TEST(ProgramParse, DecodesInputs) {
  Program p = parseProgram(kProgram, kFile);
  ASSERT_EQ(p.inputs.size(), 8u);
  const InputSpec &x = p.inputs[0];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.role, InputRole::Data);
  EXPECT_EQ(x.data, DataKind::Random);
  EXPECT_EQ(x.vocab, 256); // default: random data has no vocabulary
  EXPECT_EQ(x.dtype, DType::F32);
  EXPECT_EQ(x.globalShape, (Shape{4, 8}));
  EXPECT_EQ(x.sharding.dims,
            (std::vector<std::vector<std::string>>{{"dp"}, {}}));
  EXPECT_TRUE(x.sharding.partial.empty());

  const InputSpec &ids = p.inputs[1];
  EXPECT_EQ(ids.role, InputRole::Data);
  EXPECT_EQ(ids.data, DataKind::Tokens);
  EXPECT_EQ(ids.vocab, 50);
  EXPECT_EQ(ids.dtype, DType::I32);

  const InputSpec &w = p.inputs[2];
  EXPECT_EQ(w.role, InputRole::Param);
  EXPECT_EQ(w.init.kind, InitSpec::Normal);
  EXPECT_DOUBLE_EQ(w.init.a, 0.1);
  EXPECT_EQ(w.sharding.dims,
            (std::vector<std::vector<std::string>>{{}, {"tp"}}));

  const InputSpec &lr = p.inputs[3];
  EXPECT_EQ(lr.init.kind, InitSpec::Constant);
  EXPECT_DOUBLE_EQ(lr.init.a, 2.5);
  EXPECT_TRUE(lr.globalShape.empty());
  EXPECT_TRUE(lr.sharding.dims.empty());

  const InputSpec &bias = p.inputs[4];
  EXPECT_EQ(bias.init.kind, InitSpec::Uniform);
  EXPECT_DOUBLE_EQ(bias.init.a, -1.0);
  EXPECT_DOUBLE_EQ(bias.init.b, 2.0);

  EXPECT_EQ(p.inputs[5].init.kind, InitSpec::Zeros);

  const InputSpec &labels = p.inputs[6];
  EXPECT_EQ(labels.data, DataKind::Targets);
  EXPECT_EQ(labels.vocab, 7);
  EXPECT_EQ(labels.dtype, DType::I64);

  EXPECT_EQ(p.inputs[7].init.kind, InitSpec::Ones);
  EXPECT_EQ(p.inputs[7].dtype, DType::BF16);
}

TEST(ProgramParse, DecodesOutputs) {
  Program p = parseProgram(kProgram, kFile);
  ASSERT_EQ(p.outputs.size(), 3u);
  EXPECT_EQ(p.outputs[0].name, "y");
  EXPECT_EQ(p.outputs[0].updates, -1);
  EXPECT_EQ(p.outputs[0].sharding.dims,
            (std::vector<std::vector<std::string>>{{"dp"}, {"tp"}}));
  EXPECT_EQ(p.outputs[1].name, "w_new");
  EXPECT_EQ(p.outputs[1].updates, 2);
  EXPECT_EQ(p.outputs[1].globalShape, (Shape{8, 6}));
  EXPECT_EQ(p.outputs[2].sharding.partial, std::vector<std::string>{"dp"});
  EXPECT_TRUE(p.outputs[2].globalShape.empty());
}

TEST(ProgramParse, DecodesBuffersAndBindings) {
  Program p = parseProgram(kProgram, kFile);
  const RankClass &rc = p.rankClasses[0];
  EXPECT_EQ(rc.ranks, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(rc.arenaBytes, 928);
  EXPECT_EQ(rc.peakLiveBytes, 900);
  EXPECT_EQ(rc.inputBuffers, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, -1}));
  EXPECT_EQ(rc.outputBuffers, (std::vector<int64_t>{8, 9, 10}));
  ASSERT_EQ(rc.buffers.size(), 16u);
  const Buffer &ids = rc.buffers[1];
  EXPECT_EQ(ids.name, "ids");
  EXPECT_EQ(ids.dtype, DType::I32);
  EXPECT_EQ(ids.shape, (Shape{2, 6}));
  EXPECT_EQ(ids.offset, 64);
  EXPECT_EQ(ids.bytes, 48);
  EXPECT_EQ(ids.firstUse, 0);
  EXPECT_EQ(ids.lastUse, 0);
  const Buffer &loss = rc.buffers[10];
  EXPECT_TRUE(loss.shape.empty());
  EXPECT_EQ(loss.offset, 0);
  EXPECT_EQ(loss.firstUse, 6);
  EXPECT_EQ(loss.lastUse, 8);
  EXPECT_EQ(rc.buffers[11].name, ""); // names are optional
  EXPECT_EQ(rc.buffers[15].shape, (Shape{8, 3}));
}

TEST(ProgramParse, DecodesInstructionsAndAttrs) {
  Program p = parseProgram(kProgram, kFile);
  const std::vector<Instruction> &is = p.rankClasses[0].instructions;
  ASSERT_EQ(is.size(), 8u);

  EXPECT_EQ(is[0].op, OpCode::Dot);
  EXPECT_EQ(is[0].operands, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(is[0].results, (std::vector<int64_t>{7}));
  EXPECT_EQ(is[0].loc, "toy.mlir:3:10");
  EXPECT_EQ(is[0].attrs.lhsContract, (std::vector<int64_t>{1}));
  EXPECT_EQ(is[0].attrs.rhsContract, (std::vector<int64_t>{0}));
  EXPECT_TRUE(is[0].attrs.lhsBatch.empty());
  EXPECT_TRUE(is[0].attrs.rhsBatch.empty());
  EXPECT_EQ(is[0].attrs.group, -1);

  EXPECT_EQ(is[1].op, OpCode::Broadcast);
  EXPECT_TRUE(is[1].attrs.dims.empty());
  EXPECT_EQ(is[1].loc, "");

  EXPECT_EQ(is[2].op, OpCode::Mul); // no "attrs" key at all
  EXPECT_EQ(is[2].attrs.reduceKind, ReduceKind::Sum);

  EXPECT_EQ(is[3].op, OpCode::LayerNorm);
  EXPECT_DOUBLE_EQ(is[3].attrs.epsilon, 0.001);

  EXPECT_EQ(is[4].op, OpCode::AllReduce);
  EXPECT_EQ(is[4].attrs.collectiveKind, ReduceOp::Sum);
  EXPECT_EQ(is[4].attrs.group, 0);
  EXPECT_TRUE(isCollective(is[4].op));

  EXPECT_EQ(is[5].op, OpCode::CollectivePermute);
  EXPECT_EQ(is[5].attrs.pairs,
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}}));

  EXPECT_EQ(is[6].op, OpCode::Reduce);
  EXPECT_EQ(is[6].attrs.reduceKind, ReduceKind::Mean);
  EXPECT_EQ(is[6].attrs.dims, (std::vector<int64_t>{0, 1}));

  EXPECT_EQ(is[7].op, OpCode::Sgd);
  EXPECT_EQ(is[7].results, (std::vector<int64_t>{9, 15}));
  EXPECT_DOUBLE_EQ(is[7].attrs.momentum, 0.9);
  EXPECT_TRUE(is[7].attrs.nesterov);
  EXPECT_DOUBLE_EQ(is[7].attrs.weightDecay, 0.0);
  EXPECT_FALSE(isCollective(is[7].op));
  EXPECT_STREQ(opName(is[7].op), "sgd");
}

/// A program whose only instruction is `op` on scratch f32[4] buffers, to
/// decode one op's attributes in isolation.
Instruction decodeOne(const std::string &op, int operands, int results,
                      const json &attrs) {
  json doc = baseDoc();
  doc["inputs"] = json::array();
  doc["outputs"] = json::array();
  json &c = cls(doc);
  c["inputs"] = json::array();
  c["outputs"] = json::array();
  c["buffers"] = json::array();
  int total = operands + results;
  for (int b = 0; b < total; ++b)
    c["buffers"].push_back({{"dtype", "f32"},
                            {"shape", {4}},
                            {"offset", 64 * b},
                            {"bytes", 16},
                            {"live", {0, 0}}});
  c["arena_bytes"] = 64 * total;
  c["peak_live_bytes"] = 64 * total;
  json inst = {{"op", op},
               {"operands", json::array()},
               {"results", json::array()},
               {"attrs", attrs}};
  for (int b = 0; b < operands; ++b)
    inst["operands"].push_back(b);
  for (int b = 0; b < results; ++b)
    inst["results"].push_back(operands + b);
  c["instructions"] = json::array({inst});
  Program p = parseProgram(doc.dump(), kFile);
  return p.rankClasses[0].instructions.at(0);
}

// Defaults are the ODS ones, which are f32 attributes: the value an op holds.
static double f32(double value) { return double(float(value)); }

TEST(ProgramParse, AttributeDefaults) {
  Attrs a = decodeOne("layer_norm", 3, 1, json::object()).attrs;
  EXPECT_DOUBLE_EQ(a.epsilon, f32(1e-5));
  a = decodeOne("rms_norm", 2, 1, json::object()).attrs;
  EXPECT_DOUBLE_EQ(a.epsilon, f32(1e-6));

  a = decodeOne("adamw", 6, 3, json::object()).attrs;
  EXPECT_DOUBLE_EQ(a.beta1, f32(0.9));
  EXPECT_DOUBLE_EQ(a.beta2, f32(0.999));
  EXPECT_DOUBLE_EQ(a.epsilon, f32(1e-8));
  EXPECT_DOUBLE_EQ(a.weightDecay, f32(0.01));
  a = decodeOne("adamw", 6, 3, {{"beta1", 0.8}, {"weight_decay", 0}}).attrs;
  EXPECT_DOUBLE_EQ(a.beta1, 0.8);
  EXPECT_DOUBLE_EQ(a.weightDecay, 0.0);

  a = decodeOne("sgd", 4, 2, json::object()).attrs;
  EXPECT_DOUBLE_EQ(a.momentum, 0.0);
  EXPECT_DOUBLE_EQ(a.weightDecay, 0.0);
  EXPECT_FALSE(a.nesterov);

  a = decodeOne("attention", 3, 1, json::object()).attrs;
  EXPECT_FALSE(a.causal);
  EXPECT_FALSE(a.scale.has_value());
  EXPECT_EQ(a.positionOffset, 0);
  a = decodeOne("attention", 4, 1,
                {{"causal", true}, {"scale", 0.125}, {"position_offset", 5}})
          .attrs;
  EXPECT_TRUE(a.causal);
  ASSERT_TRUE(a.scale.has_value());
  EXPECT_DOUBLE_EQ(*a.scale, 0.125);
  EXPECT_EQ(a.positionOffset, 5);

  a = decodeOne("rope", 1, 1, json::object()).attrs;
  EXPECT_DOUBLE_EQ(a.theta, 10000.0); // exact in f32
  EXPECT_EQ(a.positionOffset, 0);

  a = decodeOne("slice", 1, 1, {{"starts", {0}}, {"limits", {2}}}).attrs;
  EXPECT_EQ(a.starts, (std::vector<int64_t>{0}));
  EXPECT_EQ(a.limits, (std::vector<int64_t>{2}));
  EXPECT_TRUE(a.strides.empty());

  a = decodeOne("constant", 0, 1, {{"splat", 1.5}}).attrs;
  EXPECT_EQ(a.value, (std::vector<double>{1.5}));
  a = decodeOne("constant", 0, 1, {{"values", {1, 2, 3, 4}}}).attrs;
  EXPECT_EQ(a.value, (std::vector<double>{1, 2, 3, 4}));
  // JSON has no infinities or NaN: they are strings.
  a = decodeOne("constant", 0, 1, {{"splat", "-inf"}}).attrs;
  EXPECT_TRUE(std::isinf(a.value.at(0)) && a.value[0] < 0);
  a = decodeOne("constant", 0, 1, {{"values", {"inf", "nan", 0, 1}}}).attrs;
  EXPECT_TRUE(std::isinf(a.value.at(0)) && a.value[0] > 0);
  EXPECT_TRUE(std::isnan(a.value.at(1)));
  try {
    decodeOne("constant", 0, 1, {{"splat", "infinity"}});
    ADD_FAILURE() << "a non-number constant was accepted";
  } catch (const std::exception &e) {
    EXPECT_THAT(
        e.what(),
        testing::HasSubstr(
            "attrs.splat: must be a number, \"inf\", \"-inf\" or \"nan\""));
  }

  a = decodeOne("compare", 2, 1, {{"direction", "le"}}).attrs;
  EXPECT_EQ(a.compareDirection, CompareKind::Le);

  a = decodeOne("all_to_all", 1, 1,
                {{"group", 0}, {"split_dim", 1}, {"concat_dim", 0}})
          .attrs;
  EXPECT_EQ(a.group, 0);
  EXPECT_EQ(a.splitDim, 1);
  EXPECT_EQ(a.concatDim, 0);

  a = decodeOne("reduce_scatter", 1, 1,
                {{"group", 0}, {"kind", "max"}, {"dim", 1}})
          .attrs;
  EXPECT_EQ(a.collectiveKind, ReduceOp::Max);
  EXPECT_EQ(a.dim, 1);

  EXPECT_EQ(decodeOne("concat", 3, 1, {{"dim", 0}}).operands.size(), 3u);
}

TEST(ProgramParse, ReformattedDocumentParsesTheSame) {
  // Whitespace and key order are not part of the format: the compiler's
  // writer sorts keys, the inline text here does not.
  Program a = parseProgram(kProgram, kFile);
  Program b = parseProgram(baseDoc().dump(2), kFile);
  EXPECT_EQ(a.rankClasses[0].instructions.size(),
            b.rankClasses[0].instructions.size());
  EXPECT_EQ(a.rankClasses[0].buffers.size(), b.rankClasses[0].buffers.size());
}

//===----------------------------------------------------------------------===//
// Errors: each names the file and the field
//===----------------------------------------------------------------------===//

TEST(ProgramErrors, BadJson) {
  EXPECT_THAT(errorOf("{\"format\": \"par-program\", "),
              AllOf(HasSubstr("toy.json: "), HasSubstr("not valid JSON")));
  EXPECT_THAT(errorOf("[1, 2]"),
              AllOf(HasSubstr("toy.json: "), HasSubstr("JSON object")));
}

TEST(ProgramErrors, LoadNamesMissingFile) {
  EXPECT_THAT(
      [] {
        try {
          loadProgram("/nonexistent/dir/prog.json");
        } catch (const ProgramError &e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("/nonexistent/dir/prog.json: cannot open"));
}

TEST(ProgramErrors, Format) {
  EXPECT_THAT(errorAfter([](json &d) { d["format"] = "onnx"; }),
              names("format", "par-program"));
  EXPECT_THAT(errorAfter([](json &d) { d.erase("format"); }),
              names("format", "par-program"));
}

TEST(ProgramErrors, Version) {
  EXPECT_THAT(errorAfter([](json &d) { d["version"] = 2; }),
              names("version", "version 2 is not supported"));
  EXPECT_THAT(errorAfter([](json &d) { d["version"] = "1"; }),
              names("version", "must be an integer"));
}

TEST(ProgramErrors, AsyncCollectivesIsABoolean) {
  EXPECT_THAT(errorAfter([](json &d) { d["memory"]["async_collectives"] = 1; }),
              names("memory.async_collectives", "must be true or false"));
}

TEST(ProgramErrors, NumRanksVersusMesh) {
  EXPECT_THAT(errorAfter([](json &d) { d["num_ranks"] = 8; }),
              names("num_ranks", "8 ranks but the mesh has 4 devices"));
  EXPECT_THAT(errorAfter([](json &d) { d["mesh"]["axes"][1]["size"] = 0; }),
              names("mesh.axes[1].size", "must be at least 1"));
  EXPECT_THAT(errorAfter([](json &d) { d["mesh"]["axes"][1]["name"] = "dp"; }),
              names("mesh.axes[1]", "listed twice"));
}

TEST(ProgramErrors, UnknownAxis) {
  EXPECT_THAT(errorAfter([](json &d) { d["groups"][0] = {"pp"}; }),
              names("groups[0]", "'pp' is not a mesh axis"));
  EXPECT_THAT(errorAfter([](json &d) {
                d["inputs"][2]["sharding"]["dims"][1] = {"pp"};
              }),
              names("inputs[2].sharding.dims[1]", "unknown mesh axis 'pp'"));
  EXPECT_THAT(errorAfter([](json &d) {
                d["outputs"][2]["sharding"]["partial"] = {"pp"};
              }),
              names("outputs[2].sharding.partial", "unknown mesh axis 'pp'"));
  EXPECT_THAT(errorAfter([](json &d) {
                d["outputs"][0]["sharding"]["dims"][1] = {"dp"};
              }),
              names("outputs[0].sharding.dims[1]", "'dp' is used twice"));
}

TEST(ProgramErrors, UnknownOp) {
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["instructions"][2]["op"] = "fma"; }),
      names("rank_classes[0].instructions[2].op", "unknown op 'fma'"));
}

TEST(ProgramErrors, OperandAndResultCounts) {
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["instructions"][2]["operands"] = {7}; }),
      names("rank_classes[0].instructions[2] (mul).operands",
            "has 1 operands"));
  // The location joins the path once the instruction names one.
  EXPECT_THAT(
      errorAfter([](json &d) {
        cls(d)["instructions"][0]["operands"] = {0, 2, 2};
      }),
      names("rank_classes[0].instructions[0] (dot at toy.mlir:3:10).operands",
            "has 3 operands"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][7]["results"] = {9, 9, 9};
              }),
              names("rank_classes[0].instructions[7] (sgd).results",
                    "has 3 results, expected 1 to 2"));
  // sgd's momentum buffer and new momentum come together (plain SGD has
  // neither).
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["instructions"][7]["results"] = {9}; }),
      names("rank_classes[0].instructions[7] (sgd)",
            "has 4 operands and 1 results: its optional operand and optional "
            "result go together"));
}

TEST(ProgramErrors, BufferIdOutOfRange) {
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][2]["operands"][1] = 16;
              }),
              names("rank_classes[0].instructions[2] (mul).operands[1]",
                    "must be a buffer id below 16"));
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["instructions"][2]["results"][0] = -1; }),
      names("rank_classes[0].instructions[2] (mul).results[0]",
            "must be a buffer id"));
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["inputs"][3] = 99; }),
      names("rank_classes[0].inputs[3]", "must be a buffer id below 16"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["outputs"] = {8, 9};
              }),
              names("rank_classes[0].outputs", "each of the 3 outputs"));
}

TEST(ProgramErrors, LiveRanges) {
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["buffers"][7]["live"] = {0, 1};
              }),
              names("rank_classes[0].buffers[7].live",
                    "read by instruction 2 outside its live range"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["buffers"][13]["live"] = {4, 4};
              }),
              names("rank_classes[0].buffers[13].live",
                    "written by instruction 3 outside its live range"));
  EXPECT_THAT(
      errorAfter([](json &d) {
        cls(d)["buffers"][9]["live"] = {7, 9};
      }),
      names("rank_classes[0].buffers[9].live", "past the last instruction"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["buffers"][9]["live"] = {8, 7};
              }),
              names("rank_classes[0].buffers[9].live", "[first, last]"));
}

TEST(ProgramErrors, OverlappingLiveBuffers) {
  // Buffer 14 (live 5-6) moved inside buffer 5 (live 0-7).
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["buffers"][14]["offset"] = 448; }),
      names("rank_classes[0].buffers[14]", "overlaps buffer 5 in the arena"));
  // The same slot is fine once buffer 5's live range ends first.
  json doc = baseDoc();
  cls(doc)["buffers"][14]["offset"] = 448;
  cls(doc)["buffers"][5]["live"] = {0, 4};
  cls(doc)["instructions"][7]["operands"] = {2, 3, 3, 3};
  EXPECT_NO_THROW(parseProgram(doc.dump(), kFile));
  // Buffer 15 (live 7-8) moved to start below buffer 8 (live 4-8) and run
  // into it.
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["buffers"][15]["offset"] = 576; }),
      names("rank_classes[0].buffers[15]", "overlaps buffer 8 in the arena"));
  // Live ranges hold their last instruction: buffer 6 live to 2 meets
  // buffer 12 (live from 2) at offset 512.
  EXPECT_THAT(
      errorAfter([](json &d) {
        cls(d)["buffers"][6]["live"] = {0, 2};
      }),
      names("rank_classes[0].buffers[12]", "overlaps buffer 6 in the arena"));
  // A buffer of no bytes overlaps nothing.
  doc = baseDoc();
  cls(doc)["buffers"][14]["offset"] = 448;
  cls(doc)["buffers"][14]["shape"] = {0, 3};
  cls(doc)["buffers"][14]["bytes"] = 0;
  EXPECT_NO_THROW(parseProgram(doc.dump(), kFile));
}

TEST(ProgramErrors, OverlapsFoundAsByComparingEveryPair) {
  // Buffers placed at random offsets: the loader rejects a layout exactly
  // when two buffers with bytes share some while both are live, a buffer
  // and the one it reuses aside.
  std::mt19937 gen(7);
  int rejected = 0;
  for (int round = 0; round < 400; ++round) {
    json doc = baseDoc();
    json &buffers = cls(doc)["buffers"];
    cls(doc)["arena_bytes"] = 64 * 48;
    for (json &b : buffers)
      b["offset"] = 64 * std::uniform_int_distribution<int64_t>(0, 46)(gen);
    // In every other round the updated weight (9) takes over the weight's
    // memory (2), which the two may share.
    bool reuse = round % 2;
    if (reuse) {
      buffers[9]["offset"] = buffers[2]["offset"];
      buffers[9]["reuses"] = 2;
    }
    bool overlaps = false;
    for (size_t x = 0; x < buffers.size(); ++x)
      for (size_t y = x + 1; y < buffers.size(); ++y) {
        if (reuse && x == 2 && y == 9)
          continue;
        const json &a = buffers[x], &b = buffers[y];
        int64_t ao = a["offset"], ab = a["bytes"], bo = b["offset"],
                bb = b["bytes"];
        overlaps |= ab && bb && ao < bo + bb && bo < ao + ab &&
                    a["live"][0] <= b["live"][1] &&
                    b["live"][0] <= a["live"][1];
      }
    std::string error;
    try {
      parseProgram(doc.dump(), kFile);
    } catch (const ProgramError &e) {
      error = e.what();
    }
    rejected += overlaps;
    EXPECT_EQ(overlaps, !error.empty()) << "round " << round << ": " << error;
    if (!error.empty()) {
      EXPECT_THAT(error, HasSubstr("in the arena while both are live"));
    }
  }
  // Both outcomes were drawn.
  EXPECT_GT(rejected, 0);
  EXPECT_LT(rejected, 400);
}

TEST(ProgramErrors, ReusedMemory) {
  // The updated weight (buffer 9, written by instruction 7) takes over the
  // weight's memory (buffer 2, read last there).
  json doc = baseDoc();
  cls(doc)["buffers"][9]["offset"] = 128;
  EXPECT_THAT(errorOf(doc.dump()),
              names("rank_classes[0].buffers[9]",
                    "overlaps buffer 2 in the arena while both are live"));
  cls(doc)["buffers"][9]["reuses"] = 2;
  EXPECT_NO_THROW(parseProgram(doc.dump(), kFile));
  // Another buffer live there still may not.
  cls(doc)["buffers"][15]["offset"] = 128;
  EXPECT_THAT(errorOf(doc.dump()), names("rank_classes[0].buffers[15]",
                                         "overlaps buffer 2 in the arena"));
}

TEST(ProgramErrors, BufferLayout) {
  EXPECT_THAT(errorAfter([](json &d) { cls(d)["buffers"][1]["bytes"] = 40; }),
              names("rank_classes[0].buffers[1].bytes",
                    "40 bytes do not hold 2x6 i32"));
  EXPECT_THAT(errorAfter([](json &d) { cls(d)["buffers"][1]["offset"] = 65; }),
              names("rank_classes[0].buffers[1].offset",
                    "not a multiple of the alignment 64"));
  EXPECT_THAT(errorAfter([](json &d) { cls(d)["arena_bytes"] = 900; }),
              names("rank_classes[0].buffers[15]", "past arena_bytes 900"));
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["buffers"][2]["dtype"] = "f8"; }),
      names("rank_classes[0].buffers[2].dtype", "unknown element type 'f8'"));
}

// Offsets, sizes and counts are checked without integer overflow.
TEST(ProgramErrors, NoOverflow) {
  const int64_t nearMax = INT64_MAX - 63;
  EXPECT_THAT(
      errorAfter([&](json &d) { cls(d)["buffers"][1]["offset"] = nearMax; }),
      names("rank_classes[0].buffers[1]",
            "offset 9223372036854775744 plus 48 bytes is past arena_bytes "
            "928"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["buffers"][1]["offset"] = uint64_t(1) << 63;
              }),
              names("rank_classes[0].buffers[1].offset", "must be an integer"));
  EXPECT_THAT(
      errorAfter([](json &d) {
        cls(d)["buffers"][1]["shape"] = {int64_t(1) << 62, 4};
      }),
      names("rank_classes[0].buffers[1].shape", "has more than 2^40 elements"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["arena_bytes"] = INT64_MAX;
                cls(d)["buffers"][1]["offset"] = INT64_MAX - 63;
              }),
              names("rank_classes[0].arena_bytes", "is more than 2^48"));
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["peak_live_bytes"] = 929; }),
      names("rank_classes[0].peak_live_bytes", "929 is above arena_bytes 928"));
  EXPECT_THAT(errorAfter([](json &d) {
                d["mesh"]["axes"][0]["size"] = int64_t(1) << 62;
                d["mesh"]["axes"][1]["size"] = 4;
              }),
              names("mesh.axes[0].size", "more than 2^20 devices"));
  EXPECT_THAT(errorAfter([](json &d) {
                d["inputs"][0]["global_shape"] = {int64_t(1) << 62, 8};
              }),
              names("inputs[0].global_shape", "more than 2^60 bytes"));
  EXPECT_THAT(errorAfter([](json &d) { d["memory"]["alignment"] = 96; }),
              names("memory.alignment", "96 is not a power of two"));
  EXPECT_THAT(
      errorAfter([](json &d) { d["inputs"][2]["init"]["std"] = nullptr; }),
      names("inputs[2].init.std", "must be a finite number"));
}

// The structured location par-opt maps back to the MLIR source.
TEST(ProgramErrors, IssueLocatesTheRecord) {
  using Record = ProgramField::Record;
  auto issueAfter = [](const std::function<void(json &)> &edit) {
    json doc = baseDoc();
    edit(doc);
    std::optional<ProgramIssue> issue = checkProgram(doc.dump(), kFile);
    EXPECT_TRUE(issue.has_value());
    return issue.value_or(ProgramIssue{});
  };
  EXPECT_FALSE(checkProgram(kProgram, kFile).has_value());

  ProgramIssue input =
      issueAfter([](json &d) { d["inputs"][3]["name"] = "x"; });
  EXPECT_EQ(input.field.record, Record::Input);
  EXPECT_EQ(input.field.index, 3);
  EXPECT_EQ(input.field.path, "inputs[3].name");
  EXPECT_EQ(input.file, kFile);
  EXPECT_EQ(input.text(),
            "toy.json: inputs[3].name: input name 'x' is used twice");

  ProgramIssue output =
      issueAfter([](json &d) { d["outputs"][2]["dtype"] = "u8"; });
  EXPECT_EQ(output.field.record, Record::Output);
  EXPECT_EQ(output.field.index, 2);

  ProgramIssue binding = issueAfter([](json &d) { cls(d)["inputs"][2] = 7; });
  EXPECT_EQ(binding.field.record, Record::Input);
  EXPECT_EQ(binding.field.index, 2);

  ProgramIssue buffer =
      issueAfter([](json &d) { cls(d)["buffers"][5]["bytes"] = 3; });
  EXPECT_EQ(buffer.field.record, Record::Buffer);
  EXPECT_EQ(buffer.field.index, 5);

  ProgramIssue inst = issueAfter(
      [](json &d) { cls(d)["instructions"][4]["attrs"].erase("kind"); });
  EXPECT_EQ(inst.field.record, Record::Instruction);
  EXPECT_EQ(inst.field.index, 4);

  ProgramIssue mesh =
      issueAfter([](json &d) { d["mesh"]["axes"][1]["size"] = 0; });
  EXPECT_EQ(mesh.field.record, Record::Mesh);

  ProgramIssue notObject = issueAfter([](json &d) { d = "not a program"; });
  EXPECT_EQ(notObject.field.record, Record::None);
  EXPECT_EQ(notObject.field.index, -1);
}

TEST(ProgramErrors, BindingShapeMismatch) {
  EXPECT_THAT(errorAfter([](json &d) { cls(d)["inputs"][2] = 7; }),
              names("rank_classes[0].inputs[2]",
                    "bound to buffer 7 of 2x3 f32 but its per-device slice is "
                    "8x3 f32"));
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["outputs"][2] = 4; }),
      names("rank_classes[0].outputs[2]",
            "bound to buffer 4 of 3 f32 but its per-device slice is  f32"));
  // Same shape and byte size, different element type.
  EXPECT_THAT(
      errorAfter([](json &d) { cls(d)["buffers"][1]["dtype"] = "f32"; }),
      names("rank_classes[0].inputs[1]",
            "bound to buffer 1 of 2x6 f32 but its per-device slice is "
            "2x6 i32"));
  EXPECT_THAT(errorAfter([](json &d) {
                d["outputs"][1]["global_shape"] = {8, 4};
              }),
              names("outputs[1].updates", "cannot replace input 'w'"));
}

TEST(ProgramErrors, UnevenSplit) {
  // 5 rows on 2 shards are padded to 3 per device, so a 2-row buffer is wrong.
  EXPECT_THAT(errorAfter([](json &d) {
                d["inputs"][0]["global_shape"] = {5, 8};
              }),
              names("rank_classes[0].inputs[0]",
                    "bound to buffer 0 of 2x8 f32 but its per-device slice is "
                    "3x8 f32"));
}

TEST(ProgramErrors, PartialInput) {
  EXPECT_THAT(errorAfter([](json &d) {
                d["inputs"][2]["sharding"]["partial"] = {"dp"};
              }),
              names("inputs[2].sharding.partial", "inputs hold whole values"));
}

TEST(ProgramErrors, InputFields) {
  EXPECT_THAT(errorAfter([](json &d) { d["inputs"][1]["dtype"] = "f32"; }),
              names("inputs[1].dtype", "token inputs must be i32 or i64"));
  EXPECT_THAT(errorAfter([](json &d) { d["inputs"][1]["vocab"] = 0; }),
              names("inputs[1].vocab", "must be at least 1"));
  EXPECT_THAT(errorAfter([](json &d) { d["inputs"][4]["init"].erase("high"); }),
              names("inputs[4].init", "missing field 'high'"));
  EXPECT_THAT(errorAfter([](json &d) { d["inputs"][2]["role"] = "buffer"; }),
              names("inputs[2].role", "'buffer' is not param or data"));
  EXPECT_THAT(errorAfter([](json &d) { d["inputs"][3]["name"] = "w"; }),
              names("inputs[3].name", "'w' is used twice"));
}

TEST(ProgramErrors, RankClassCoverage) {
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["ranks"] = {0, 1, 2};
              }),
              names("rank_classes", "rank 3 is in no rank class"));
  EXPECT_THAT(
      errorAfter([](json &d) {
        cls(d)["ranks"] = {0, 1, 2, 4};
      }),
      names("rank_classes[0].ranks", "rank 4 is not below num_ranks 4"));
}

TEST(ProgramErrors, Attributes) {
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][0]["attrs"]["lhs_contract"] = "1";
              }),
              names("rank_classes[0].instructions[0] (dot at "
                    "toy.mlir:3:10).attrs.lhs_contract",
                    "must be a list of integers"));
  EXPECT_THAT(
      errorAfter([](json &d) {
        cls(d)["instructions"][0]["attrs"].erase("rhs_contract");
      }),
      names("rank_classes[0].instructions[0] (dot at toy.mlir:3:10).attrs",
            "missing attribute 'rhs_contract'"));
  // Only a float attribute that may be non-finite (pad's fill) takes "inf".
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][3]["attrs"]["epsilon"] = "inf";
              }),
              names("rank_classes[0].instructions[3] (layer_norm).attrs.epsilon",
                    "must be a finite number"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][4]["attrs"]["kind"] = "prod";
              }),
              names("rank_classes[0].instructions[4] (all_reduce).attrs.kind",
                    "'prod' is not one of sum, max, min"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][4]["attrs"]["group"] = 1;
              }),
              names("rank_classes[0].instructions[4] (all_reduce).attrs.group",
                    "group 1 is not in the program's 1 groups"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][7]["attrs"]["nesterov"] = 1;
              }),
              names("rank_classes[0].instructions[7] (sgd).attrs.nesterov",
                    "must be true or false"));
}

TEST(ProgramErrors, CollectivePermutePairs) {
  const std::string pairs =
      "rank_classes[0].instructions[5] (collective_permute).attrs.pairs";
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][5]["attrs"]["pairs"] = {{0, 1}, {1, 2}};
              }),
              names(pairs + "[1]", "below the group size 2"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][5]["attrs"]["pairs"] = {{0, 1}, {0, 0}};
              }),
              names(pairs + "[1]", "a source or a target twice"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][5]["attrs"]["pairs"] = {{0, 1}, {1, 1}};
              }),
              names(pairs + "[1]", "a source or a target twice"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][5]["attrs"]["pairs"] = {{0, -1}};
              }),
              names(pairs + "[0]", "non-negative integers"));
  EXPECT_THAT(errorAfter([](json &d) {
                cls(d)["instructions"][5]["attrs"]["pairs"] = {{0, 1, 1}};
              }),
              names(pairs + "[0]", "must be [source, target]"));
}

//===----------------------------------------------------------------------===//
// Mesh helpers on a dp=2 x tp=3 mesh
//===----------------------------------------------------------------------===//

Program mesh2x3() {
  Program p;
  p.mesh = {{"dp", 2}, {"tp", 3}};
  p.numRanks = 6;
  return p;
}

/// Ranks in row-major order with dp major, by enumeration rather than
/// division: rank = 0, 1, ... for (dp, tp) = (0,0), (0,1), (0,2), (1,0), ...
std::vector<std::pair<int64_t, int64_t>> enumerateCoords() {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t dp = 0; dp < 2; ++dp)
    for (int64_t tp = 0; tp < 3; ++tp)
      out.emplace_back(dp, tp);
  return out;
}

TEST(MeshHelpers, MeshCoordsAreRowMajorFirstAxisMajor) {
  Program p = mesh2x3();
  auto coords = enumerateCoords();
  for (int64_t rank = 0; rank < 6; ++rank)
    EXPECT_EQ(meshCoords(p, rank),
              (std::vector<int64_t>{coords[rank].first, coords[rank].second}))
        << "rank " << rank;
}

TEST(MeshHelpers, GroupIndexAndSize) {
  Program p = mesh2x3();
  EXPECT_EQ(groupSize(p, {}), 1);
  EXPECT_EQ(groupSize(p, {"dp"}), 2);
  EXPECT_EQ(groupSize(p, {"tp"}), 3);
  EXPECT_EQ(groupSize(p, {"tp", "dp"}), 6);
  EXPECT_EQ(groupSize(p, {"dp", "tp"}), 6);
  for (auto [dp, tp] : enumerateCoords()) {
    std::vector<int64_t> c{dp, tp};
    EXPECT_EQ(groupIndex(p, c, {}), 0);
    EXPECT_EQ(groupIndex(p, c, {"dp"}), dp);
    EXPECT_EQ(groupIndex(p, c, {"tp"}), tp);
    EXPECT_EQ(groupIndex(p, c, {"dp", "tp"}), dp * 3 + tp);
    // Listed out of mesh order: the group's first axis (tp) is major.
    EXPECT_EQ(groupIndex(p, c, {"tp", "dp"}), tp * 2 + dp);
  }
  // The out-of-order group still numbers its 6 members 0..5 exactly once.
  std::set<int64_t> seen;
  for (int64_t rank = 0; rank < 6; ++rank)
    seen.insert(groupIndex(p, meshCoords(p, rank), {"tp", "dp"}));
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(MeshHelpers, LocalSlice) {
  Program p = mesh2x3();
  auto coords = enumerateCoords();
  for (int64_t rank = 0; rank < 6; ++rank) {
    auto [dp, tp] = coords[rank];
    Shape offsets, shape;
    localSlice(p, {4, 9, 5}, {{{"dp"}, {"tp"}, {}}, {}}, rank, offsets, shape);
    EXPECT_EQ(shape, (Shape{2, 3, 5}));
    EXPECT_EQ(offsets, (Shape{dp * 2, tp * 3, 0})) << "rank " << rank;

    localSlice(p, {12, 7}, {{{"tp", "dp"}, {}}, {}}, rank, offsets, shape);
    EXPECT_EQ(shape, (Shape{2, 7}));
    EXPECT_EQ(offsets, (Shape{(tp * 2 + dp) * 2, 0})) << "rank " << rank;

    localSlice(p, {7, 12}, {{{}, {"dp", "tp"}}, {}}, rank, offsets, shape);
    EXPECT_EQ(shape, (Shape{7, 2}));
    EXPECT_EQ(offsets, (Shape{0, (dp * 3 + tp) * 2})) << "rank " << rank;

    localSlice(p, {}, {}, rank, offsets, shape);
    EXPECT_TRUE(shape.empty());
    EXPECT_TRUE(offsets.empty());

    // Uneven: 7 rows on tp=3 are pieces of 3 (3, 3, 1 real); 2 on 6 shards
    // are pieces of 1, the last four all padding.
    localSlice(p, {7, 4}, {{{"tp"}, {}}, {}}, rank, offsets, shape);
    EXPECT_EQ(offsets, (Shape{tp * 3, 0})) << "rank " << rank;
    EXPECT_EQ(shape, (Shape{tp == 2 ? 1 : 3, 4})) << "rank " << rank;
    localSlice(p, {2}, {{{"dp", "tp"}}, {}}, rank, offsets, shape);
    EXPECT_EQ(offsets, (Shape{dp * 3 + tp})) << "rank " << rank;
    EXPECT_EQ(shape, (Shape{dp * 3 + tp < 2 ? 1 : 0})) << "rank " << rank;
  }
  EXPECT_EQ(localBufferShape(p, {7, 4}, {{{"tp"}, {}}, {}}), (Shape{3, 4}));
  EXPECT_EQ(localBufferShape(p, {2}, {{{"dp", "tp"}}, {}}), (Shape{1}));
}

TEST(MeshHelpers, ForEachInPaddedSlice) {
  // The real 2x3 box of a 3x4 buffer: local indices skip the padding.
  std::vector<std::pair<int64_t, int64_t>> seen;
  forEachInSlice(Shape{5, 7}, Shape{3, 4}, Shape{2, 3}, Shape{3, 4},
                 [&](int64_t l, int64_t g) {
                   seen.push_back({l, g});
                 });
  std::vector<std::pair<int64_t, int64_t>> expected = {
      {0, 25}, {1, 26}, {2, 27}, {4, 32}, {5, 33}, {6, 34}};
  EXPECT_EQ(seen, expected);
}

//===----------------------------------------------------------------------===//
// splitPieces / joinPieces
//===----------------------------------------------------------------------===//

/// Reference: piece j holds the elements whose index along `dim` falls in
/// [j * len, (j + 1) * len), in row-major order of the piece's own shape.
template <typename T>
std::vector<T> referencePieces(const std::vector<T> &x, const Shape &shape,
                               int64_t dim, int64_t n) {
  std::vector<T> out;
  int64_t len = shape[dim] / n;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t a = 0; a < shape[0]; ++a)
      for (int64_t b = 0; b < shape[1]; ++b)
        for (int64_t c = 0; c < shape[2]; ++c) {
          int64_t idx[3] = {a, b, c};
          if (idx[dim] < j * len || idx[dim] >= (j + 1) * len)
            continue;
          out.push_back(x[(a * shape[1] + b) * shape[2] + c]);
        }
  return out;
}

template <typename T> void checkPieces(DType dtype) {
  const Shape shape{4, 8, 12};
  std::vector<T> x(numElements(shape));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = T(i * 7 + 3);
  Tensor input{dtype, shape, x.data()};
  for (int64_t dim = 0; dim < 3; ++dim)
    for (int64_t n : {1, 2, 4}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + ", n " + std::to_string(n));
      std::vector<T> pieces(x.size(), T(-1));
      splitPieces(input, dim, n, pieces.data());
      EXPECT_EQ(pieces, referencePieces(x, shape, dim, n));
      std::vector<T> back(x.size(), T(-1));
      Tensor out{dtype, shape, back.data()};
      joinPieces(pieces.data(), n, dim, out);
      EXPECT_EQ(back, x);
    }
}

TEST(Pieces, SplitMatchesReferenceAndJoinInverts) {
  checkPieces<float>(DType::F32);
  checkPieces<int64_t>(DType::I64);
  checkPieces<uint16_t>(DType::BF16); // 2-byte elements move as raw bits
}

//===----------------------------------------------------------------------===//
// Counter-based RNG
//===----------------------------------------------------------------------===//

TEST(Rng, RandomBitsIsAPureFunction) {
  for (uint64_t i = 0; i < 100; ++i)
    EXPECT_EQ(randomBits(7, 11, i), randomBits(7, 11, i));
  // Pinned from the current generator. Initialized parameters depend on
  // these exact bits, so changing the generator changes every model's
  // starting point and must be a deliberate edit of this value.
  EXPECT_EQ(randomBits(0, 0, 0), 0x33fe8bd4f9c57863ULL);
}

TEST(Rng, SeedsStreamsAndIndicesGiveDifferentBits) {
  std::set<uint64_t> seen;
  for (uint64_t seed = 0; seed < 8; ++seed)
    for (uint64_t stream = 0; stream < 8; ++stream)
      for (uint64_t index = 0; index < 64; ++index)
        seen.insert(randomBits(seed, stream, index));
  EXPECT_EQ(seen.size(), 8u * 8u * 64u);
  EXPECT_NE(randomBits(1, 2, 3), randomBits(2, 2, 3));
  EXPECT_NE(randomBits(1, 2, 3), randomBits(1, 3, 3));
  EXPECT_NE(randomBits(1, 2, 3), randomBits(1, 2, 4));
  // Swapping seed and stream must not give the same sequence.
  EXPECT_NE(randomBits(1, 2, 0), randomBits(2, 1, 0));
}

TEST(Rng, UniformIsInUnitIntervalWithMeanHalf) {
  const int n = 100000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    double u = randomUniform(42, streamOf("w"), i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.02);
}

TEST(Rng, NormalHasMeanZeroAndUnitVariance) {
  const int n = 100000;
  double sum = 0, squares = 0;
  for (int i = 0; i < n; ++i) {
    double z = randomNormal(42, streamOf("w"), i);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    squares += z * z;
  }
  double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(squares / n - mean * mean, 1.0, 0.02);
}

TEST(Rng, StreamOfIsStableFnv1a) {
  // Published FNV-1a 64-bit test vectors: stream ids must not change across
  // builds or platforms, or checkpoints and inits stop matching.
  EXPECT_EQ(streamOf(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(streamOf("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(streamOf("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(streamOf("layer0.wq"), streamOf(std::string("layer0.") + "wq"));
  EXPECT_NE(streamOf("layer0.wq"), streamOf("layer0.wk"));
}

//===----------------------------------------------------------------------===//
// The bubble replayed from measured instruction times
//===----------------------------------------------------------------------===//

Instruction transferOf(OpCode op, int64_t channel) {
  Instruction inst;
  inst.op = op;
  inst.attrs.channel = channel;
  return inst;
}

Instruction computeOf() {
  Instruction inst;
  inst.op = OpCode::Add;
  return inst;
}

TEST(BubbleReplay, ReceivesWaitForTheirSends) {
  // Stage 0 computes 1 s, sends, computes 1 s; stage 1 receives, then
  // computes 2 s: it starts at 1, so the step takes 3 s for 2 s of work on
  // the busiest stage.
  Program p;
  p.rankClasses.resize(2);
  p.rankClasses[0].instructions = {computeOf(),
                                   transferOf(OpCode::Send, 7), computeOf()};
  p.rankClasses[1].instructions = {transferOf(OpCode::Recv, 7), computeOf()};
  BubbleReplay r = replayPipeline(p, {{1.0, 5.0, 1.0}, {9.0, 2.0}});
  EXPECT_DOUBLE_EQ(r.makespan, 3.0);
  ASSERT_EQ(r.busy.size(), 2u);
  EXPECT_DOUBLE_EQ(r.busy[0], 2.0); // the send's own time is not work
  EXPECT_DOUBLE_EQ(r.busy[1], 2.0);
  EXPECT_DOUBLE_EQ(r.bubble, 0.5);
}

TEST(BubbleReplay, NamesAReceiveWithoutASend) {
  Program p;
  p.rankClasses.resize(2);
  p.rankClasses[0].instructions = {computeOf()};
  p.rankClasses[1].instructions = {transferOf(OpCode::Recv, 3)};
  try {
    replayPipeline(p, {{1.0}, {0.0}});
    FAIL() << "expected an error";
  } catch (const std::runtime_error &e) {
    EXPECT_THAT(e.what(), HasSubstr("rank class 1 waits at instruction 0"));
  }
  try {
    replayPipeline(p, {{1.0}});
    FAIL() << "expected an error";
  } catch (const std::runtime_error &e) {
    EXPECT_THAT(e.what(), HasSubstr("times for 1 of 2 rank classes"));
  }
}

//===----------------------------------------------------------------------===//
// The backend's scratch, set aside before the first step
//===----------------------------------------------------------------------===//

/// What the scratch tables below were last asked to set aside.
size_t reservedKernelScratch = 0;
bool refuseKernelScratch = false;

/// The CPU backend with scratch sizes of its own: a dot asks for its
/// operands' and result's bytes, a layer norm for 1000 bytes.
class ScratchDevice final : public Device {
public:
  ScratchDevice() : cpu_(createDevice("cpu")), table_(cpu_->kernels()) {
    table_.scratch[size_t(OpCode::Dot)] = [](const Attrs &,
                                             const std::vector<Tensor> &in,
                                             const std::vector<Tensor> &out) {
      return in[0].bytes() + in[1].bytes() + out[0].bytes();
    };
    table_.scratch[size_t(OpCode::LayerNorm)] =
        [](const Attrs &, const std::vector<Tensor> &,
           const std::vector<Tensor> &) { return size_t(1000); };
    table_.reserveScratch = [](size_t bytes) {
      if (refuseKernelScratch)
        throw DeviceError("out of device memory: 12 bytes are free");
      reservedKernelScratch = bytes;
    };
  }
  const char *backend() const override { return "scratch"; }
  MemorySpace memorySpace() const override { return cpu_->memorySpace(); }
  const KernelTable &kernels() const override { return table_; }
  void *allocate(size_t bytes, size_t alignment) override {
    return cpu_->allocate(bytes, alignment);
  }
  void release(void *memory) override { cpu_->release(memory); }
  void fill(void *dst, unsigned char byte, size_t bytes) override {
    cpu_->fill(dst, byte, bytes);
  }
  size_t trailingBytesEqual(const void *memory, size_t bytes,
                            unsigned char byte) override {
    return cpu_->trailingBytesEqual(memory, bytes, byte);
  }
  void copyIn(void *dst, const void *host, size_t bytes) override {
    cpu_->copyIn(dst, host, bytes);
  }
  void copyOut(void *host, const void *src, size_t bytes) override {
    cpu_->copyOut(host, src, bytes);
  }
  void copy(void *dst, const void *src, size_t bytes) override {
    cpu_->copy(dst, src, bytes);
  }
  Stream computeStream() override { return cpu_->computeStream(); }
  Stream commStream() override { return cpu_->commStream(); }
  Event record(Stream stream) override { return cpu_->record(stream); }
  void wait(Stream stream, Event event) override { cpu_->wait(stream, event); }
  void synchronize() override { cpu_->synchronize(); }

private:
  std::unique_ptr<Device> cpu_;
  KernelTable table_;
};

/// Rank 0 of the toy program's world, whose collectives are never run
/// here: an all-reduce asks for three times its operand's bytes of
/// scratch, a permute for 5 bytes.
class ScratchComm final : public Collectives {
public:
  int64_t worldRank() const override { return 0; }
  int64_t worldSize() const override { return 4; }
  int64_t memberIndex(int64_t) const override { return 0; }
  int64_t memberCount(int64_t) const override { return 2; }
  std::vector<int64_t> memberShape(int64_t) const override { return {2}; }
  void allReduce(int64_t, ReduceOp, const Tensor &, Tensor &, Stream) override {
  }
  void allGather(int64_t, int64_t, const Tensor &, Tensor &, Stream) override {}
  void reduceScatter(int64_t, ReduceOp, int64_t, const Tensor &, Tensor &,
                     Stream) override {}
  void allToAll(int64_t, int64_t, int64_t, const Tensor &, Tensor &,
                Stream) override {}
  void permute(int64_t, const std::vector<std::pair<int64_t, int64_t>> &,
               const Tensor &, Tensor &, Stream) override {}
  void exchange(int64_t, const std::vector<int64_t> &, const void *,
                const std::vector<int64_t> &, void *) override {}
  std::unique_ptr<Transfer> send(int64_t, int64_t, const Tensor &) override {
    return nullptr;
  }
  std::unique_ptr<Transfer> recv(int64_t, int64_t, Tensor &) override {
    return nullptr;
  }
  std::vector<std::string> gatherToRoot(const std::string &bytes) override {
    return {bytes};
  }
  void barrier() override {}
  void agree(std::vector<int64_t> &, ReduceOp) override {}
  size_t scratchBytes(OpCode op, const Attrs &, const Tensor &input,
                      const Tensor &) const override {
    if (op == OpCode::AllReduce)
      return 3 * input.bytes();
    return op == OpCode::CollectivePermute ? 5 : 0;
  }
  void reserveScratch(size_t bytes) override { reserved = bytes; }
  size_t reserved = 0;
};

TEST(ExecutorScratch, SetsAsideTheMostAnyLaunchAndCollectiveNeeds) {
  Program program = parseProgram(kProgram, kFile);
  ScratchDevice device;
  ScratchComm comm;
  reservedKernelScratch = 0;
  refuseKernelScratch = false;
  Executor exec(program, device, comm, nullptr);
  // The dot reads x [2, 8] and w [8, 3] and writes [2, 3] (64 + 96 + 24
  // bytes); the layer norm's 1000 is the most.
  EXPECT_EQ(exec.kernelScratchBytes(), 1000);
  EXPECT_EQ(reservedKernelScratch, 1000u);
  // The all-reduce's operand is [2, 3] f32: 72 bytes, over the permute's 5.
  EXPECT_EQ(exec.commScratchBytes(), 72);
  EXPECT_EQ(comm.reserved, 72u);
}

TEST(ExecutorScratch, ADeviceTooSmallForItNamesTheWholeNeed) {
  Program program = parseProgram(kProgram, kFile);
  ScratchDevice device;
  ScratchComm comm;
  refuseKernelScratch = true;
  try {
    Executor exec(program, device, comm, nullptr);
    ADD_FAILURE() << "expected a RunError";
  } catch (const RunError &e) {
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr("rank 0: cannot set aside 1000 bytes of "
                                "kernel scratch next to the 928-byte arena "
                                "(2000 bytes in all)"),
                      HasSubstr("12 bytes are free")));
  }
  refuseKernelScratch = false;
}

//===----------------------------------------------------------------------===//
// The watchdog of collectives that return before they complete (NCCL)
//===----------------------------------------------------------------------===//

TEST(CollectiveWatch, DropsCompletedCollectivesInOrder) {
  CollectiveWatch<int> watch(300);
  CommContext context{7, 9,
                      "all_reduce over [tp] (instruction 9 at m.mlir:9:8)"};
  for (int token : {1, 2, 3})
    watch.issued(token, "ncclAllReduce", 3, context, 10.0 * token);
  std::set<int> done = {1, 3}, released;
  auto isDone = [&](int token) { return done.count(token) > 0; };
  auto release = [&](int token) { released.insert(token); };
  // 2 has not completed: 3 waits behind it, though it is done.
  watch.poll(100, isDone, release);
  EXPECT_EQ(released, std::set<int>({1}));
  EXPECT_EQ(watch.inFlight(), 2u);
  done.insert(2);
  watch.poll(100, isDone, release);
  EXPECT_EQ(released, std::set<int>({1, 2, 3}));
  EXPECT_EQ(watch.inFlight(), 0u);
}

TEST(CollectiveWatch, OneRunningPastTheTimeoutNamesItsRankStepAndCall) {
  CollectiveWatch<int> watch(300);
  watch.issued(1, "ncclAllReduce", 0, CommContext{2, 4, "warm-up"}, 0);
  watch.issued(2, "ncclAllGather", 3,
               CommContext{7, 9,
                           "all_gather over [dp] (instruction 9 at "
                           "m.mlir:9:8)"},
               50);
  watch.issued(3, "ncclAllReduce", 3, CommContext{7, 10, "later"}, 60);
  std::set<int> released;
  auto release = [&](int token) { released.insert(token); };
  auto onlyFirst = [](int token) { return token == 1; };
  // 300 s after the gather was issued, not more: nothing yet.
  watch.poll(350, onlyFirst, release);
  EXPECT_EQ(released, std::set<int>({1}));
  try {
    watch.poll(351, onlyFirst, release);
    ADD_FAILURE() << "expected a CommError";
  } catch (const CommError &e) {
    EXPECT_EQ(std::string(e.what()),
              "rank 3, step 7, all_gather over [dp] (instruction 9 at "
              "m.mlir:9:8): ncclAllGather did not complete within 300 s "
              "(--timeout): a member of its group stalled or failed (1 "
              "later collective(s) wait behind it)");
  }
  // The entries stay: waiting on is told again.
  EXPECT_EQ(watch.inFlight(), 2u);
  EXPECT_THROW(watch.poll(400, onlyFirst, release), CommError);
  watch.clear(release);
  EXPECT_EQ(released, std::set<int>({1, 2, 3}));
  EXPECT_EQ(watch.inFlight(), 0u);
}

TEST(CollectiveWatch, NoTimeoutNeverFires) {
  CollectiveWatch<int> watch(0);
  watch.issued(1, "ncclSend/ncclRecv (permute)", 0, CommContext{}, 0);
  watch.poll(
      1e9, [](int) { return false; }, [](int) {});
  EXPECT_EQ(watch.inFlight(), 1u);
}

} // namespace
