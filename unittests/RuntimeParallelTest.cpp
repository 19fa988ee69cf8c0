//===- RuntimeParallelTest.cpp - The CPU kernels on a team of threads -----===//
//
// The team runs every chunk once and passes errors on; kernels give the same
// bits on the team as on one thread (SerialKernels), on shapes large enough
// to be split; the blocked reductions agree with plain double sums. Run
// with PAR_CPU_THREADS=3 (CMakeLists.txt), so the team has workers on any
// machine.
//
//===----------------------------------------------------------------------===//

#include "TestBuffer.h"
#include "par/Runtime/Kernels.h"
#include "par/Runtime/Parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>

using namespace par::rt;
using par::testutil::Buffer;

namespace {

Buffer random(DType dtype, Shape shape, unsigned seed, double lo = -2,
              double hi = 2) {
  Buffer b(dtype, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < b.size(); ++i)
    b.set(i, dist(gen));
  return b;
}

Buffer scalar(DType dtype, double value) {
  Buffer b(dtype, {});
  b.set(0, value);
  return b;
}

/// Runs `kernel` on the team and on one thread into fresh outputs of the
/// given types and shapes, and expects the same bytes.
void expectSameOnTeam(
    const char *what, const std::vector<std::pair<DType, Shape>> &outs,
    const std::function<void(std::vector<Tensor> &)> &kernel) {
  auto run = [&](bool serial) {
    std::vector<Buffer> buffers;
    for (const auto &[dtype, shape] : outs) {
      // NaN in every float type: an element left unwritten shows.
      buffers.emplace_back(dtype, shape);
      std::memset(buffers.back().words.data(), 0xff,
                  buffers.back().words.size() * sizeof(uint64_t));
    }
    std::vector<Tensor> tensors;
    for (Buffer &b : buffers)
      tensors.push_back(b.tensor());
    if (serial) {
      SerialKernels one;
      kernel(tensors);
    } else {
      kernel(tensors);
    }
    return buffers;
  };
  std::vector<Buffer> team = run(false), serial = run(true);
  for (size_t i = 0; i < outs.size(); ++i)
    EXPECT_EQ(0, std::memcmp(team[i].words.data(), serial[i].words.data(),
                             team[i].words.size() * sizeof(uint64_t)))
        << what << ": output " << i << " differs between the team and one "
        << "thread";
}

TEST(ParallelTest, TheTeamHasWorkers) {
  // CMakeLists.txt runs this test with PAR_CPU_THREADS=3.
  EXPECT_EQ(3, cpuThreads());
}

TEST(ParallelTest, EveryChunkRunsOnce) {
  for (int64_t count : {1, 2, 3, 7, 64, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
    parallelChunks(count, [&](int64_t c) { hits[size_t(c)]++; });
    for (int64_t c = 0; c < count; ++c)
      EXPECT_EQ(1, hits[size_t(c)].load()) << "chunk " << c << " of " << count;
  }
  // Ranges cover [0, n) without overlap, nested calls included.
  const int64_t n = 100003;
  std::vector<std::atomic<int>> seen(n);
  parallelFor(n, 1000, [&](int64_t begin, int64_t end) {
    parallelFor(end - begin, 10, [&](int64_t b, int64_t e) {
      for (int64_t i = begin + b; i < begin + e; ++i)
        seen[size_t(i)]++;
    });
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(1, seen[size_t(i)].load()) << "element " << i;
}

TEST(ParallelTest, AChunksErrorReachesTheCaller) {
  std::atomic<int> ran{0};
  EXPECT_THROW(parallelChunks(16,
                              [&](int64_t c) {
                                ran++;
                                if (c == 5)
                                  throw KernelError("chunk 5 failed");
                              }),
               KernelError);
  EXPECT_EQ(16, ran.load()); // the others still ran; the team is reusable
  std::atomic<int> after{0};
  parallelChunks(8, [&](int64_t) { after++; });
  EXPECT_EQ(8, after.load());
}

// Two threads of the process running kernels at once: the one that finds
// the team busy runs its chunks itself, and both finish every chunk.
TEST(ParallelTest, TwoCallersAtOnceBothFinish) {
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int round = 0; round < 200; ++round)
      parallelChunks(16, [&](int64_t) { total++; });
  };
  std::thread other(caller);
  caller();
  other.join();
  EXPECT_EQ(2 * 200 * 16, total.load());
}

TEST(ParallelTest, ReductionsAreTheSameOnTheTeam) {
  // Trailing rows, leading rows (column sums), a middle dim, one long row
  // (summed in blocks) and a layout the fast paths do not take.
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {{{512, 1024}, {1}},  {{512, 1024}, {0}},
                                   {{8, 300, 96}, {1}}, {{300001}, {0}},
                                   {{3, 70000}, {1}},   {{64, 32, 48}, {0, 2}}};
  unsigned seed = 1;
  for (const Case &c : cases)
    for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max,
                            ReduceKind::Min}) {
      Buffer x = random(DType::F32, c.shape, seed++);
      Shape kept;
      for (size_t d = 0; d < c.shape.size(); ++d)
        if (std::find(c.dims.begin(), c.dims.end(), int64_t(d)) == c.dims.end())
          kept.push_back(c.shape[d]);
      expectSameOnTeam("reduce", {{DType::F32, kept}},
                       [&](std::vector<Tensor> &out) {
                         reduce(kind, x.tensor(), c.dims, out[0]);
                       });
    }
}

TEST(ParallelTest, BlockedSumsMatchPlainDoubleSums) {
  for (Shape shape : {Shape{300001}, Shape{3, 70000}, Shape{5, 777}}) {
    Buffer x = random(DType::F32, shape, 7, -1, 3);
    const int64_t rows = shape.size() == 1 ? 1 : shape[0];
    const int64_t len = shape.back();
    Buffer out(DType::F64, {rows});
    Buffer x64(DType::F64, shape);
    for (int64_t i = 0; i < x.size(); ++i)
      x64.set(i, x.get(i));
    Tensor input = x64.tensor(), result = out.tensor();
    if (shape.size() == 1) {
      Buffer one(DType::F64, {});
      Tensor r = one.tensor();
      reduce(ReduceKind::Sum, input, {0}, r);
      out.set(0, one.get(0));
    } else {
      reduce(ReduceKind::Sum, input, {1}, result);
    }
    for (int64_t r = 0; r < rows; ++r) {
      long double expected = 0;
      for (int64_t i = 0; i < len; ++i)
        expected += x64.get(r * len + i);
      EXPECT_NEAR(double(expected), out.get(r),
                  1e-12 * std::fabs(double(expected)))
          << "row " << r << " of " << len;
    }
  }
}

TEST(ParallelTest, DotsAreTheSameOnTheTeam) {
  // Rows split (m >= 256), columns split (few rows), batches, a transposed
  // operand, and f64.
  Buffer a = random(DType::F32, {512, 96}, 1),
         b = random(DType::F32, {96, 384}, 2);
  expectSameOnTeam("dot rows", {{DType::F32, {512, 384}}},
                   [&](std::vector<Tensor> &out) {
                     dot(a.tensor(), b.tensor(), {}, {}, {1}, {0}, out[0]);
                   });
  Buffer few = random(DType::F32, {40, 512}, 3),
         wide = random(DType::F32, {512, 1024}, 4);
  expectSameOnTeam("dot columns", {{DType::F32, {40, 1024}}},
                   [&](std::vector<Tensor> &out) {
                     dot(few.tensor(), wide.tensor(), {}, {}, {1}, {0}, out[0]);
                   });
  Buffer ba = random(DType::F32, {6, 300, 64}, 5),
         bb = random(DType::F32, {6, 200, 64}, 6);
  expectSameOnTeam("dot batched, rhs transposed", {{DType::F32, {6, 300, 200}}},
                   [&](std::vector<Tensor> &out) {
                     dot(ba.tensor(), bb.tensor(), {0}, {0}, {2}, {2}, out[0]);
                   });
  Buffer da = random(DType::F64, {256, 128}, 7),
         db = random(DType::F64, {256, 300}, 8);
  expectSameOnTeam("dot f64, lhs transposed", {{DType::F64, {128, 300}}},
                   [&](std::vector<Tensor> &out) {
                     dot(da.tensor(), db.tensor(), {}, {}, {0}, {0}, out[0]);
                   });
}

TEST(ParallelTest, RowKernelsAreTheSameOnTheTeam) {
  Buffer x = random(DType::F32, {64, 24, 300}, 11);
  expectSameOnTeam(
      "softmax last dim", {{DType::F32, x.shape}},
      [&](std::vector<Tensor> &out) { softmax(x.tensor(), 2, out[0]); });
  expectSameOnTeam(
      "log_softmax middle dim", {{DType::F32, x.shape}},
      [&](std::vector<Tensor> &out) { logSoftmax(x.tensor(), 1, out[0]); });
  Buffer g = random(DType::F32, {300}, 12), b = random(DType::F32, {300}, 13);
  expectSameOnTeam(
      "layer_norm", {{DType::F32, x.shape}}, [&](std::vector<Tensor> &out) {
        layerNorm(x.tensor(), g.tensor(), b.tensor(), 1e-5f, out[0]);
      });
  expectSameOnTeam("rms_norm", {{DType::F32, x.shape}},
                   [&](std::vector<Tensor> &out) {
                     rmsNorm(x.tensor(), g.tensor(), 1e-5f, out[0]);
                   });
  Buffer logits = random(DType::F32, {1000, 200}, 14);
  Buffer labels(DType::I64, {1000});
  for (int64_t i = 0; i < 1000; ++i)
    labels.set(i, double((i * 37) % 200));
  expectSameOnTeam("cross_entropy", {{DType::F32, {}}},
                   [&](std::vector<Tensor> &out) {
                     crossEntropy(logits.tensor(), labels.tensor(), out[0]);
                   });
}

TEST(ParallelTest, ElementwiseAndOptimizerAreTheSameOnTheTeam) {
  Buffer x = random(DType::F32, {300, 1000}, 21),
         y = random(DType::F32, {300, 1000}, 22);
  expectSameOnTeam("gelu", {{DType::F32, x.shape}},
                   [&](std::vector<Tensor> &out) {
                     unary(UnaryKind::Gelu, x.tensor(), out[0]);
                   });
  expectSameOnTeam("mul", {{DType::F32, x.shape}},
                   [&](std::vector<Tensor> &out) {
                     binary(BinaryKind::Mul, x.tensor(), y.tensor(), out[0]);
                   });
  Buffer bf = random(DType::BF16, {300, 1000}, 23);
  expectSameOnTeam(
      "convert bf16 to f32", {{DType::F32, bf.shape}},
      [&](std::vector<Tensor> &out) { convert(bf.tensor(), out[0]); });
  Buffer row = random(DType::F32, {1000}, 24);
  expectSameOnTeam(
      "broadcast", {{DType::F32, {300, 1000}}},
      [&](std::vector<Tensor> &out) { broadcast(row.tensor(), {1}, out[0]); });
  expectSameOnTeam("transpose", {{DType::F32, {1000, 300}}},
                   [&](std::vector<Tensor> &out) {
                     transpose(x.tensor(), {1, 0}, out[0]);
                   });
  Buffer m = random(DType::F32, x.shape, 25),
         v = random(DType::F32, x.shape, 26, 0, 1);
  Buffer lr = scalar(DType::F32, 1e-3), step = scalar(DType::F32, 3);
  expectSameOnTeam(
      "adamw",
      {{DType::F32, x.shape}, {DType::F32, x.shape}, {DType::F32, x.shape}},
      [&](std::vector<Tensor> &out) {
        adamw(x.tensor(), y.tensor(), m.tensor(), v.tensor(), lr.tensor(),
              step.tensor(), 0.9f, 0.999f, 1e-8f, 0.01f, out[0], out[1],
              out[2]);
      });
  // A fused group: gelu(x * y + 1) over an f32 result.
  using Op = par::catalogue::OpCode;
  std::vector<par::catalogue::FusedStep> steps(4);
  steps[0].op = Op::Mul;
  steps[0].args = {0, 1};
  steps[1].op = Op::Constant;
  steps[1].attrs.value = {1.0};
  steps[2].op = Op::Add;
  steps[2].args = {2, 3};
  steps[3].op = Op::Gelu;
  steps[3].args = {4};
  for (auto &step : steps)
    step.dtype = int(DType::F32);
  expectSameOnTeam("fused", {{DType::F32, x.shape}},
                   [&](std::vector<Tensor> &out) {
                     fused(steps, {x.tensor(), y.tensor()}, out[0]);
                   });
}

// A batch of updates (one parallel loop over every member) against each
// update on its own: the same bits, with members of other types (f64, a
// bf16 gradient) and SGD with and without momentum.
TEST(ParallelTest, BatchedUpdatesAreTheUpdatesOneByOne) {
  const std::vector<std::pair<DType, Shape>> params = {{DType::F32, {300, 200}},
                                                       {DType::F32, {64}},
                                                       {DType::F64, {40, 40}},
                                                       {DType::F32, {70000}},
                                                       {DType::F32, {3, 5}}};
  Buffer lr = scalar(DType::F32, 1e-2), step = scalar(DType::F32, 4);
  std::vector<Buffer> p, g, m, v;
  unsigned seed = 100;
  for (const auto &[dtype, shape] : params) {
    p.push_back(random(dtype, shape, seed++));
    // The second update reads a bf16 gradient.
    g.push_back(random(p.size() == 2 ? DType::BF16 : dtype, shape, seed++));
    m.push_back(random(dtype, shape, seed++));
    v.push_back(random(dtype, shape, seed++, 0, 1));
  }
  std::vector<par::catalogue::Attrs> attrs(params.size());
  for (size_t k = 0; k < attrs.size(); ++k) {
    attrs[k].beta1 = 0.9;
    attrs[k].beta2 = 0.99 + 0.001 * double(k);
    attrs[k].epsilon = 1e-8;
    attrs[k].weightDecay = k % 2 ? 0.0 : 0.1;
    attrs[k].momentum = k % 2 ? 0.0 : 0.9;
    attrs[k].nesterov = k == 2;
  }
  auto outputs = [&](size_t count) {
    std::vector<std::vector<Buffer>> out(params.size());
    for (size_t k = 0; k < params.size(); ++k)
      for (size_t r = 0; r < count; ++r) {
        out[k].emplace_back(params[k].first, params[k].second);
        std::memset(out[k].back().words.data(), 0xff,
                    out[k].back().words.size() * sizeof(uint64_t));
      }
    return out;
  };
  auto tensorsOf = [](std::vector<std::vector<Buffer>> &buffers) {
    std::vector<std::vector<Tensor>> t(buffers.size());
    for (size_t k = 0; k < buffers.size(); ++k)
      for (Buffer &b : buffers[k])
        t[k].push_back(b.tensor());
    return t;
  };
  auto same = [&](std::vector<std::vector<Buffer>> &a,
                  std::vector<std::vector<Buffer>> &b, const char *what) {
    for (size_t k = 0; k < a.size(); ++k)
      for (size_t r = 0; r < a[k].size(); ++r)
        EXPECT_EQ(0, std::memcmp(a[k][r].words.data(), b[k][r].words.data(),
                                 a[k][r].words.size() * sizeof(uint64_t)))
            << what << ": update " << k << ", result " << r;
  };
  std::vector<const par::catalogue::Attrs *> attrPtrs;
  for (auto &a : attrs)
    attrPtrs.push_back(&a);

  // AdamW.
  std::vector<std::vector<Tensor>> in(params.size());
  for (size_t k = 0; k < params.size(); ++k)
    in[k] = {p[k].tensor(), g[k].tensor(), m[k].tensor(),
             v[k].tensor(), lr.tensor(),   step.tensor()};
  auto batched = outputs(3), alone = outputs(3);
  std::vector<std::vector<Tensor>> batchedOut = tensorsOf(batched),
                                   aloneOut = tensorsOf(alone);
  adamwBatch(attrPtrs, in, batchedOut);
  for (size_t k = 0; k < params.size(); ++k)
    adamw(in[k][0], in[k][1], in[k][2], in[k][3], in[k][4], in[k][5],
          float(attrs[k].beta1), float(attrs[k].beta2), float(attrs[k].epsilon),
          float(attrs[k].weightDecay), aloneOut[k][0], aloneOut[k][1],
          aloneOut[k][2]);
  same(batched, alone, "adamw");

  // SGD: with a momentum buffer where attrs[k].momentum is set, plain
  // otherwise.
  std::vector<std::vector<Tensor>> sgdIn(params.size());
  std::vector<size_t> results(params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    bool buffered = attrs[k].momentum != 0;
    sgdIn[k] = buffered ? std::vector<Tensor>{p[k].tensor(), g[k].tensor(),
                                              m[k].tensor(), lr.tensor()}
                        : std::vector<Tensor>{p[k].tensor(), g[k].tensor(),
                                              lr.tensor()};
    results[k] = buffered ? 2 : 1;
  }
  auto sgdBatched = outputs(2), sgdAlone = outputs(2);
  std::vector<std::vector<Tensor>> sb = tensorsOf(sgdBatched),
                                   sa = tensorsOf(sgdAlone);
  for (size_t k = 0; k < params.size(); ++k) {
    sb[k].resize(results[k]);
    sa[k].resize(results[k]);
  }
  sgdBatch(attrPtrs, sgdIn, sb);
  for (size_t k = 0; k < params.size(); ++k) {
    if (results[k] == 2)
      sgd(sgdIn[k][0], sgdIn[k][1], sgdIn[k][2], sgdIn[k][3],
          float(attrs[k].momentum), float(attrs[k].weightDecay),
          attrs[k].nesterov, sa[k][0], sa[k][1]);
    else
      sgd(sgdIn[k][0], sgdIn[k][1], sgdIn[k][2], float(attrs[k].weightDecay),
          sa[k][0]);
  }
  same(sgdBatched, sgdAlone, "sgd");
}

TEST(ParallelTest, AttentionIsTheSameOnTheTeam) {
  // q [B, S, H, D], k/v [B, T, Hkv, D]: grouped heads, causal.
  const int64_t B = 2, S = 200, H = 4, Hkv = 2, D = 16;
  Buffer q = random(DType::F32, {B, S, H, D}, 31),
         k = random(DType::F32, {B, S, Hkv, D}, 32);
  Buffer v = random(DType::F32, {B, S, Hkv, D}, 33),
         dout = random(DType::F32, {B, S, H, D}, 34);
  Buffer o(DType::F32, {B, S, H, D}), lse(DType::F32, {B, S, H});
  {
    Tensor ot = o.tensor(), lt = lse.tensor();
    attention(q.tensor(), k.tensor(), v.tensor(), true, 0.25f, 0, ot, &lt);
  }
  expectSameOnTeam("attention",
                   {{DType::F32, o.shape}, {DType::F32, lse.shape}},
                   [&](std::vector<Tensor> &out) {
                     attention(q.tensor(), k.tensor(), v.tensor(), true, 0.25f,
                               0, out[0], &out[1]);
                   });
  expectSameOnTeam("attention_grad_q", {{DType::F32, q.shape}},
                   [&](std::vector<Tensor> &out) {
                     attentionGradQ(q.tensor(), k.tensor(), v.tensor(),
                                    o.tensor(), dout.tensor(), lse.tensor(),
                                    true, 0.25f, 0, out[0]);
                   });
  expectSameOnTeam("attention_grad_kv",
                   {{DType::F32, k.shape}, {DType::F32, v.shape}},
                   [&](std::vector<Tensor> &out) {
                     attentionGradKv(q.tensor(), k.tensor(), v.tensor(),
                                     o.tensor(), dout.tensor(), lse.tensor(),
                                     true, 0.25f, 0, out[0], out[1]);
                   });
}

} // namespace
