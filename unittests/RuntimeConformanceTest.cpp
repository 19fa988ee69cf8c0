//===- RuntimeConformanceTest.cpp - Every backend runs every op alike -----===//
//
// The conformance suite of the runtime's backend seam (Device.h): for every
// backend built in and every compute op of the generated catalogue, one
// case per element type runs through the backend's device (inputs copied
// in, the kernel launched from its table, results copied out) and must
//   - give the CPU backend's results (within the element type's precision),
//     or be rejected with a KernelError exactly where the CPU backend
//     rejects it;
//   - write every element of its results: run with results first filled
//     with 0x00 and with 0xff bytes, it gives the same bytes (and floats
//     are finite);
//   - give the same bytes when run again.
// An op of the catalogue without a case here, or a backend without a kernel
// for an op, fails the suite: a new op or a new backend cannot skip it.
// The values are the CPU backend's: RuntimeKernelsTest checks those against
// naive references, so for the CPU backend itself this suite checks
// coverage, the device path, complete writes and determinism; the value
// comparison bites from the second backend on.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Device.h"
#ifdef PAR_HAVE_CUDA_BACKEND
#include "par/Runtime/Comm/DeviceCollectives.h"
#include "par/Runtime/Cuda/CudaBackend.h"
#endif
#include "par/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>

using namespace par::rt;
using par::catalogue::Attrs;
using par::catalogue::OpCode;

namespace {

/// A host tensor that owns its bytes.
struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<char> bytes;

  HostTensor() = default;
  HostTensor(DType dtype, Shape shape, unsigned char fill = 0)
      : dtype(dtype), shape(std::move(shape)),
        bytes(size_t(numElements(this->shape)) * dtypeBytes(dtype),
              char(fill)) {}
  int64_t size() const { return numElements(shape); }
  double get(int64_t i) const { return loadElement(dtype, bytes.data(), i); }
  void set(int64_t i, double v) { storeElement(dtype, bytes.data(), i, v); }
};

/// One launch of an op: attributes, operands and the results' types.
struct Case {
  Attrs attrs;
  std::vector<HostTensor> in;
  std::vector<std::pair<DType, Shape>> out;
};

/// Builds an op's case for element type `t` from a seeded generator.
using CaseBuilder = std::function<Case(DType t, std::mt19937 &rng)>;

HostTensor values(DType t, Shape shape, std::mt19937 &rng, double lo,
                  double hi) {
  HostTensor h(t, std::move(shape));
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int64_t> whole{int64_t(lo), int64_t(hi)};
  for (int64_t i = 0; i < h.size(); ++i)
    h.set(i, isFloat(t) ? real(rng) : double(whole(rng)));
  return h;
}
HostTensor ints(DType t, Shape shape, std::mt19937 &rng, int64_t lo,
                int64_t hi) {
  HostTensor h(t, std::move(shape));
  std::uniform_int_distribution<int64_t> whole(lo, hi);
  for (int64_t i = 0; i < h.size(); ++i)
    h.set(i, double(whole(rng)));
  return h;
}
HostTensor scalar(DType t, double v) {
  HostTensor h(t, {});
  h.set(0, v);
  return h;
}

Case elementwise(DType t, std::mt19937 &rng, int operands, double lo,
                 double hi) {
  Case c;
  for (int i = 0; i < operands; ++i)
    c.in.push_back(values(t, {3, 5}, rng, lo, hi));
  c.out = {{t, {3, 5}}};
  return c;
}

/// Appends a step of `op` reading `args` and making `type` to the fused
/// group of `c`; the step, for its own attributes.
par::catalogue::FusedStep *addStep(Case &c, OpCode op,
                                   std::vector<int64_t> args, DType type) {
  par::catalogue::FusedStep &s = c.attrs.body.emplace_back();
  s.op = op;
  s.args = std::move(args);
  s.dtype = int(type);
  return &s;
}

/// A case for every compute op of the catalogue.
std::map<OpCode, CaseBuilder> cases() {
  std::map<OpCode, CaseBuilder> m;
  for (OpCode op :
       {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Max, OpCode::Min})
    m[op] = [](DType t, std::mt19937 &rng) {
      return elementwise(t, rng, 2, -4, 4);
    };
  m[OpCode::Div] = [](DType t, std::mt19937 &rng) {
    Case c = elementwise(t, rng, 1, -4, 4);
    c.in.push_back(values(t, {3, 5}, rng, 1, 3)); // no division by zero
    return c;
  };
  for (OpCode op : {OpCode::Neg, OpCode::Exp, OpCode::Tanh, OpCode::Gelu,
                    OpCode::Silu, OpCode::Relu, OpCode::Sigmoid})
    m[op] = [](DType t, std::mt19937 &rng) {
      return elementwise(t, rng, 1, -3, 3);
    };
  for (OpCode op : {OpCode::Log, OpCode::Sqrt, OpCode::Rsqrt})
    m[op] = [](DType t, std::mt19937 &rng) {
      return elementwise(t, rng, 1, 1, 4);
    };
  m[OpCode::Compare] = [](DType t, std::mt19937 &rng) {
    Case c = elementwise(t, rng, 2, -2, 2);
    c.attrs.compareDirection = par::catalogue::CompareDirection::Le;
    c.out = {{DType::I1, {3, 5}}};
    return c;
  };
  m[OpCode::Select] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {ints(DType::I1, {3, 5}, rng, 0, 1), values(t, {3, 5}, rng, -2, 2),
            values(t, {3, 5}, rng, -2, 2)};
    c.out = {{t, {3, 5}}};
    return c;
  };
  m[OpCode::Convert] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {4, 3}, rng, -8, 8)};
    c.out = {{t == DType::F32 ? DType::BF16 : DType::F32, {4, 3}}};
    return c;
  };
  m[OpCode::Constant] = [](DType t, std::mt19937 &) {
    Case c;
    c.attrs.value = {1, -2, 3, 0, 5, 6};
    c.out = {{t, {2, 3}}};
    return c;
  };
  m[OpCode::Fused] = [](DType t, std::mt19937 &rng) {
    // A broadcast bias, a splat scale, a compare/select, then a convert.
    Case c;
    c.in = {values(t, {5, 7}, rng, -2, 2), values(t, {7}, rng, -2, 2)};
    auto step = [&](OpCode op, std::vector<int64_t> args, DType type) {
      return addStep(c, op, std::move(args), type);
    };
    step(OpCode::Broadcast, {1}, t)->attrs.dims = {1}; // 2
    step(OpCode::Constant, {}, t)->attrs.value = {2};  // 3
    step(OpCode::Mul, {0, 3}, t);                      // 4
    step(OpCode::Add, {4, 2}, t);                      // 5
    step(OpCode::Compare, {5, 0}, DType::I1)->attrs.compareDirection =
        par::catalogue::CompareDirection::Lt; // 6
    step(OpCode::Select, {6, 5, 0}, t);       // 7
    DType to = t == DType::F32 ? DType::BF16 : DType::F32;
    step(OpCode::Convert, {7}, to); // 8
    c.out = {{to, {5, 7}}};
    return c;
  };
  m[OpCode::Broadcast] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3}, rng, -2, 2)};
    c.attrs.dims = {1};
    c.out = {{t, {4, 3}}};
    return c;
  };
  m[OpCode::Reduce] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 4, 2}, rng, -2, 2)};
    c.attrs.reduceKind = par::catalogue::ReduceKind::Sum;
    c.attrs.dims = {0, 2};
    c.out = {{t, {4}}};
    return c;
  };
  m[OpCode::Transpose] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {2, 3, 4}, rng, -2, 2)};
    c.attrs.perm = {2, 0, 1};
    c.out = {{t, {4, 2, 3}}};
    return c;
  };
  m[OpCode::Reshape] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 4}, rng, -2, 2)};
    c.out = {{t, {2, 6}}};
    return c;
  };
  m[OpCode::Slice] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 5}, rng, -2, 2)};
    c.attrs.starts = {1, 0};
    c.attrs.limits = {3, 5};
    c.attrs.strides = {1, 2};
    c.out = {{t, {2, 3}}};
    return c;
  };
  m[OpCode::Concat] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {2, 3}, rng, -2, 2), values(t, {1, 3}, rng, -2, 2)};
    c.attrs.dim = 0;
    c.out = {{t, {3, 3}}};
    return c;
  };
  m[OpCode::Dot] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {2, 3, 4}, rng, -1, 1), values(t, {2, 4, 5}, rng, -1, 1)};
    c.attrs.lhsBatch = {0};
    c.attrs.rhsBatch = {0};
    c.attrs.lhsContract = {2};
    c.attrs.rhsContract = {1};
    c.out = {{t, {2, 3, 5}}};
    return c;
  };
  m[OpCode::Softmax] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 6}, rng, -4, 4)};
    c.attrs.dim = 1;
    c.out = {{t, {3, 6}}};
    return c;
  };
  m[OpCode::Argmax] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 6}, rng, -4, 4)};
    c.attrs.dim = 1;
    c.out = {{DType::I32, {3}}};
    return c;
  };
  m[OpCode::Argmin] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 6}, rng, -4, 4)};
    c.attrs.dim = 0;
    c.out = {{DType::I64, {6}}};
    return c;
  };
  m[OpCode::LogSoftmax] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 6}, rng, -4, 4)};
    c.attrs.dim = 0;
    c.out = {{t, {3, 6}}};
    return c;
  };
  m[OpCode::LayerNorm] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 8}, rng, -2, 2), values(t, {8}, rng, 0.5, 1.5),
            values(t, {8}, rng, -1, 1)};
    c.attrs.epsilon = 1e-5;
    c.out = {{t, {3, 8}}};
    return c;
  };
  m[OpCode::RmsNorm] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 8}, rng, -2, 2), values(t, {8}, rng, 0.5, 1.5)};
    c.attrs.epsilon = 1e-6;
    c.out = {{t, {3, 8}}};
    return c;
  };
  m[OpCode::Attention] = [](DType t, std::mt19937 &rng) {
    Case c; // 4 query heads on 2 KV heads, causal
    c.in = {values(t, {2, 3, 4, 4}, rng, -1, 1),
            values(t, {2, 3, 2, 4}, rng, -1, 1),
            values(t, {2, 3, 2, 4}, rng, -1, 1)};
    c.attrs.causal = true;
    // With the row statistics the gradient ops read.
    c.out = {{t, {2, 3, 4, 4}},
             {t == DType::F64 ? DType::F64 : DType::F32, {2, 3, 4}}};
    return c;
  };
  // The gradients: q, k, v, out, grad_out and f32 row statistics (any
  // finite values do: the backends must agree on the same formula).
  auto attentionGrad = [](DType t, std::mt19937 &rng) {
    Case c; // 4 query heads on 2 KV heads, causal
    c.in = {values(t, {2, 3, 4, 4}, rng, -1, 1),
            values(t, {2, 3, 2, 4}, rng, -1, 1),
            values(t, {2, 3, 2, 4}, rng, -1, 1),
            values(t, {2, 3, 4, 4}, rng, -1, 1),
            values(t, {2, 3, 4, 4}, rng, -1, 1),
            values(t == DType::F64 ? DType::F64 : DType::F32, {2, 3, 4}, rng,
                   0.5, 1.5)};
    c.attrs.causal = true;
    return c;
  };
  m[OpCode::AttentionGradQ] = [=](DType t, std::mt19937 &rng) {
    Case c = attentionGrad(t, rng);
    c.out = {{t, {2, 3, 4, 4}}};
    return c;
  };
  m[OpCode::AttentionGradKv] = [=](DType t, std::mt19937 &rng) {
    Case c = attentionGrad(t, rng);
    c.out = {{t, {2, 3, 2, 4}}, {t, {2, 3, 2, 4}}};
    return c;
  };
  m[OpCode::Embedding] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {6, 4}, rng, -2, 2), ints(DType::I32, {2, 3}, rng, 0, 5)};
    c.out = {{t, {2, 3, 4}}};
    return c;
  };
  m[OpCode::ScatterAdd] = [](DType t, std::mt19937 &rng) {
    Case c; // duplicate rows add
    c.in = {values(t, {5, 3}, rng, -2, 2), ints(DType::I32, {4, 1}, rng, 0, 4),
            values(t, {4, 3}, rng, -2, 2)};
    c.attrs.dims = {0};
    c.out = {{t, {5, 3}}};
    return c;
  };
  m[OpCode::Pad] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {3, 4}, rng, -2, 2)};
    c.attrs.low = {1, 0};
    c.attrs.high = {0, 2};
    c.attrs.interior = {1, 1};
    c.attrs.fill = 0.5;
    c.out = {{t, {6, 9}}};
    return c;
  };
  m[OpCode::Gather] = [](DType t, std::mt19937 &rng) {
    Case c; // repeated and out-of-range rows
    c.in = {values(t, {5, 3}, rng, -2, 2), ints(DType::I64, {4, 1}, rng, -1, 5)};
    c.attrs.dims = {0};
    c.out = {{t, {4, 3}}};
    return c;
  };
  m[OpCode::CrossEntropy] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {4, 7}, rng, -3, 3), ints(DType::I32, {4}, rng, 0, 6)};
    c.out = {{DType::F32, {}}};
    return c;
  };
  m[OpCode::Rope] = [](DType t, std::mt19937 &rng) {
    Case c;
    c.in = {values(t, {2, 3, 2, 4}, rng, -1, 1)};
    c.attrs.theta = 10000;
    c.attrs.positionOffset = 2;
    c.out = {{t, {2, 3, 2, 4}}};
    return c;
  };
  m[OpCode::Adamw] = [](DType t, std::mt19937 &rng) {
    Case c; // fp32 master and moments, the gradient in `t`
    c.in = {values(DType::F32, {3, 4}, rng, -1, 1),
            values(t, {3, 4}, rng, -1, 1),
            values(DType::F32, {3, 4}, rng, -0.1, 0.1),
            values(DType::F32, {3, 4}, rng, 0, 0.1),
            scalar(DType::F32, 0.01),
            scalar(DType::I32, 3)};
    c.attrs.beta1 = 0.9;
    c.attrs.beta2 = 0.999;
    c.attrs.epsilon = 1e-8;
    c.attrs.weightDecay = 0.01;
    c.out = {{DType::F32, {3, 4}}, {DType::F32, {3, 4}}, {DType::F32, {3, 4}}};
    return c;
  };
  m[OpCode::Sgd] = [](DType t, std::mt19937 &rng) {
    Case c; // with a momentum buffer (the plain form is its own test)
    c.in = {values(t, {3, 4}, rng, -1, 1), values(t, {3, 4}, rng, -1, 1),
            values(t, {3, 4}, rng, -0.1, 0.1), scalar(DType::F32, 0.1)};
    c.attrs.momentum = 0.9;
    c.attrs.weightDecay = 0.01;
    c.attrs.nesterov = true;
    c.out = {{t, {3, 4}}, {t, {3, 4}}};
    return c;
  };
  return m;
}

/// What a backend made of a case: results, or the KernelError it raised.
struct Outcome {
  std::vector<HostTensor> results;
  std::optional<std::string> error;
};

/// Host tensors copied into a device's memory, released with this.
class DeviceCopies {
public:
  explicit DeviceCopies(Device &device) : device(device) {}
  ~DeviceCopies() {
    for (void *data : memory)
      device.release(data);
  }
  DeviceCopies(const DeviceCopies &) = delete;
  DeviceCopies &operator=(const DeviceCopies &) = delete;
  Tensor of(const HostTensor &h) {
    void *data = device.allocate(std::max<size_t>(h.bytes.size(), 1), 64);
    memory.push_back(data);
    device.copyIn(data, h.bytes.data(), h.bytes.size());
    return Tensor{h.dtype, h.shape, data};
  }

private:
  Device &device;
  std::vector<void *> memory;
};

/// Runs `c` through `device`: operands copied into device memory, the
/// kernel launched, results (first filled with `fill` bytes) copied out.
Outcome runCase(Device &device, OpCode op, const Case &c,
                unsigned char fill = 0xff) {
  DeviceCopies copies(device);
  auto onDevice = [&](const HostTensor &h) { return copies.of(h); };
  std::vector<Tensor> in, out;
  for (const HostTensor &h : c.in)
    in.push_back(onDevice(h));
  for (const auto &[dtype, shape] : c.out)
    out.push_back(onDevice(HostTensor(dtype, shape, fill)));
  Outcome outcome;
  try {
    device.launch(op, c.attrs, in, out);
    device.synchronize();
    for (const Tensor &t : out) {
      HostTensor h(t.dtype, t.shape);
      device.copyOut(h.bytes.data(), t.data, h.bytes.size());
      outcome.results.push_back(std::move(h));
    }
  } catch (const KernelError &e) {
    outcome.error = e.what();
  }
  return outcome;
}

double tolerance(DType t) {
  switch (t) {
  case DType::BF16:
    return 2e-2;
  case DType::F16:
    return 4e-3;
  case DType::F32:
    return 1e-5;
  case DType::F64:
    return 1e-12;
  default:
    return 0; // integers and masks are exact
  }
}

const DType kTypes[] = {DType::F32, DType::F64, DType::BF16,
                        DType::F16, DType::I32, DType::I64};

/// The backend under test and the CPU backend it is compared with.
struct BackendPair {
  std::unique_ptr<Device> device, reference;
  std::string missing; // why `device` could not be made
  explicit BackendPair(const std::string &backend)
      : reference(createDevice("cpu")) {
    try {
      device = createDevice(backend);
    } catch (const DeviceError &e) {
      // A backend built in but without its hardware here (CUDA with no
      // GPU): the tests that run kernels skip, the table is still checked.
      missing = e.what();
    }
  }
};

class Conformance : public ::testing::TestWithParam<std::string>,
                    protected BackendPair {
protected:
  Conformance() : BackendPair(GetParam()) {}
};

TEST_P(Conformance, EveryComputeOpHasACaseAndAKernel) {
  std::map<OpCode, CaseBuilder> all = cases();
  for (int i = 0; i < par::catalogue::kNumOps; ++i) {
    const par::catalogue::OpSpec &spec = par::catalogue::kOps[i];
    if (spec.usesGroup)
      continue; // collectives and axis_index run through Collectives
    EXPECT_TRUE(all.count(spec.code))
        << spec.name << " has no conformance case";
    EXPECT_NE(backendKernels(GetParam()).lookup(spec.code), nullptr)
        << "the " << GetParam() << " backend has no kernel for " << spec.name;
  }
}

/// Runs `c` on `device` and on the CPU backend `reference`: both reject
/// it, or `device` gives the CPU's results (within the element type's
/// precision), writes every element of them and repeats them exactly.
/// Counts the cases both accept in `accepted`.
void checkCase(Device &device, Device &reference, OpCode op, const Case &c,
               int &accepted) {
  Outcome want = runCase(reference, op, c);
  Outcome got = runCase(device, op, c);
  ASSERT_EQ(got.error.has_value(), want.error.has_value())
      << (got.error    ? *got.error
          : want.error ? *want.error
                       : "");
  if (got.error)
    return; // both reject this case
  ++accepted;
  Outcome again = runCase(device, op, c);
  Outcome zeroed = runCase(device, op, c, 0x00);
  ASSERT_FALSE(again.error.has_value()) << *again.error;
  ASSERT_FALSE(zeroed.error.has_value()) << *zeroed.error;
  for (size_t r = 0; r < got.results.size(); ++r) {
    const HostTensor &g = got.results[r], &w = want.results[r];
    EXPECT_EQ(g.bytes, zeroed.results[r].bytes)
        << "result " << r << " depends on what its memory held: an "
        << "element is not written";
    EXPECT_EQ(g.bytes, again.results[r].bytes)
        << "result " << r << " not deterministic";
    double tol = tolerance(g.dtype);
    for (int64_t i = 0; i < g.size(); ++i) {
      double gv = g.get(i), wv = w.get(i);
      if (isFloat(g.dtype)) {
        ASSERT_TRUE(std::isfinite(gv)) << "result " << r << " element " << i
                                       << " not written (or not finite)";
      }
      ASSERT_LE(std::abs(gv - wv), tol * std::max(1.0, std::abs(wv)))
          << "result " << r << " element " << i << ": " << gv << " vs " << wv;
    }
  }
}

/// One backend and one op: each op is its own test, so a failing op does
/// not hide the ops after it.
class ConformanceOp
    : public ::testing::TestWithParam<std::tuple<std::string, OpCode>>,
      protected BackendPair {
protected:
  ConformanceOp() : BackendPair(std::get<0>(GetParam())) {}
};

std::vector<OpCode> caseOps() {
  std::vector<OpCode> ops;
  for (const auto &entry : cases())
    ops.push_back(entry.first);
  return ops;
}

TEST_P(ConformanceOp, EveryTypeMatchesTheCpuBackend) {
  if (!device)
    GTEST_SKIP() << missing;
  const auto &[backend, op] = GetParam();
  const char *name = par::catalogue::spec(op).name;
  if (!device->kernels().lookup(op))
    GTEST_SKIP() << "no kernel (reported by EveryComputeOpHasACaseAndAKernel)";
  CaseBuilder build = cases().at(op);
  int accepted = 0;
  for (DType t : kTypes) {
    std::mt19937 rng(1234 + int(op) * 17 + int(t));
    SCOPED_TRACE(std::string(name) + " with " + dtypeName(t) + " on " +
                 backend);
    checkCase(*device, *reference, op, build(t, rng), accepted);
    if (HasFatalFailure())
      return;
  }
  EXPECT_GE(accepted, 1) << name << " accepts no element type";
}

TEST_P(Conformance, PlainSgdAndRuntimeOperandsMatch) {
  if (!device)
    GTEST_SKIP() << missing;
  std::mt19937 rng(7);
  // SGD without a momentum buffer: param, grad, lr -> param.
  Case sgd;
  sgd.in = {values(DType::F32, {5}, rng, -1, 1),
            values(DType::F32, {5}, rng, -1, 1), scalar(DType::F32, 0.5)};
  sgd.attrs.weightDecay = 0.1;
  sgd.out = {{DType::F32, {5}}};
  // Attention and rope at a runtime position (the last operand).
  Case attention;
  attention.in = {values(DType::F32, {1, 2, 2, 4}, rng, -1, 1),
                  values(DType::F32, {1, 5, 2, 4}, rng, -1, 1),
                  values(DType::F32, {1, 5, 2, 4}, rng, -1, 1),
                  scalar(DType::I64, 3)};
  attention.attrs.causal = true;
  attention.out = {{DType::F32, {1, 2, 2, 4}}};
  Case rope;
  rope.in = {values(DType::F32, {1, 2, 1, 4}, rng, -1, 1),
             scalar(DType::I64, 5)};
  rope.attrs.theta = 10000;
  rope.out = {{DType::F32, {1, 2, 1, 4}}};
  for (auto &[op, c] :
       std::vector<std::pair<OpCode, Case>>{{OpCode::Sgd, sgd},
                                            {OpCode::Attention, attention},
                                            {OpCode::Rope, rope}}) {
    SCOPED_TRACE(par::catalogue::spec(op).name);
    Outcome want = runCase(*reference, op, c), got = runCase(*device, op, c);
    ASSERT_FALSE(want.error.has_value()) << *want.error;
    ASSERT_FALSE(got.error.has_value()) << *got.error;
    for (int64_t i = 0; i < got.results[0].size(); ++i)
      EXPECT_NEAR(got.results[0].get(i), want.results[0].get(i), 1e-5);
    // Plain SGD against its formula, p - lr (g + wd p): no momentum state.
    if (op == OpCode::Sgd)
      for (int64_t i = 0; i < got.results[0].size(); ++i) {
        double p = c.in[0].get(i), g = c.in[1].get(i);
        EXPECT_NEAR(got.results[0].get(i), p - 0.5 * (g + 0.1 * p), 1e-6);
      }
  }
}

TEST_P(Conformance, FusedReductionsMatch) {
  if (!device)
    GTEST_SKIP() << missing;
  // (x + b) * x reduced: rows long enough for a block per result element,
  // short columns for a thread per element, and everything at once.
  struct Group {
    par::rt::Shape shape;
    std::vector<int64_t> dims;
    par::catalogue::ReduceKind kind;
  };
  using Kind = par::catalogue::ReduceKind;
  int accepted = 0;
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16})
    for (const Group &s :
         {Group{{4, 300}, {1}, Kind::Sum}, Group{{4, 300}, {1}, Kind::Max},
          Group{{6, 5, 3}, {0, 1}, Kind::Mean},
          Group{{6, 5, 3}, {0, 1, 2}, Kind::Sum},
          // Columns: on the CUDA backend, 32 neighbouring results a block
          // and the tokens in chunks (ReduceKernels.h).
          Group{{4, 64, 48}, {0, 1}, Kind::Mean}}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " over " +
                   std::to_string(s.dims.size()) + " dims");
      std::mt19937 rng(3);
      Case c;
      c.in = {values(t, s.shape, rng, -2, 2),
              values(t, {s.shape.back()}, rng, -2, 2)};
      auto step = [&](OpCode op, std::vector<int64_t> args) {
        return addStep(c, op, std::move(args), t);
      };
      step(OpCode::Broadcast, {1})->attrs.dims = {int64_t(s.shape.size()) -
                                                  1}; // 2
      step(OpCode::Add, {0, 2});                      // 3
      step(OpCode::Mul, {3, 0});                      // 4
      par::catalogue::FusedStep *red = step(OpCode::Reduce, {4});
      red->attrs.reduceKind = s.kind;
      red->attrs.dims = s.dims;
      red->shape = s.shape;
      par::rt::Shape kept;
      for (size_t d = 0; d < s.shape.size(); ++d)
        if (std::find(s.dims.begin(), s.dims.end(), int64_t(d)) == s.dims.end())
          kept.push_back(s.shape[d]);
      c.out = {{t, kept}};
      checkCase(*device, *reference, OpCode::Fused, c, accepted);
      if (HasFatalFailure())
        return;
      // Keeping what the reduce reads: a second result.
      c.out.push_back({t, s.shape});
      checkCase(*device, *reference, OpCode::Fused, c, accepted);
      if (HasFatalFailure())
        return;
    }
  EXPECT_EQ(accepted, 40);
}

// Groups that start with their GEMM (a producer dot): a GEMM and its bias
// (on CUDA cuBLASLt's bias epilogue, no second pass), the same with a
// transposed weight and a batch dim, and a GEMM with a bias, tanh and a
// residual after it (the GEMM, then the steps over its result in place).
TEST_P(Conformance, ProducerDotGroupsMatch) {
  if (!device)
    GTEST_SKIP() << missing;
  int accepted = 0;
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (bool tail : {false, true})
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + (tail ? " with a tail" : "") +
                     (transposed ? ", transposed weight" : ""));
        std::mt19937 rng(5);
        Case c;
        c.in = {
            values(t, {2, 33, 40}, rng, -1, 1),
            values(t, transposed ? Shape{24, 40} : Shape{40, 24}, rng, -1, 1),
            values(t, {24}, rng, -1, 1), values(t, {2, 33, 24}, rng, -1, 1)};
        auto step = [&](OpCode op, std::vector<int64_t> args) {
          return addStep(c, op, std::move(args), t);
        };
        par::catalogue::FusedStep *d = step(OpCode::Dot, {0, 1}); // 4
        d->attrs.lhsContract = {2};
        d->attrs.rhsContract = {transposed ? 1 : 0};
        step(OpCode::Broadcast, {2})->attrs.dims = {2}; // 5
        step(OpCode::Add, {4, 5});                      // 6
        if (tail) {
          step(OpCode::Tanh, {6});   // 7
          step(OpCode::Add, {7, 3}); // 8
        }
        c.out = {{t, {2, 33, 24}}};
        checkCase(*device, *reference, OpCode::Fused, c, accepted);
        if (HasFatalFailure())
          return;
      }
  EXPECT_EQ(accepted, 12);
}

TEST_P(Conformance, FusedNormalizationsMatch) {
  if (!device)
    GTEST_SKIP() << missing;
  // (x + y) normalized by rows: rows of 40 and of 300 (a block per row on
  // a GPU either way), with and without keeping the sum.
  int accepted = 0;
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16})
    for (const par::rt::Shape &shape :
         {par::rt::Shape{3, 4, 40}, par::rt::Shape{5, 300}})
      for (OpCode norm : {OpCode::LayerNorm, OpCode::RmsNorm}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " +
                     par::catalogue::spec(norm).name + " of rows of " +
                     std::to_string(shape.back()));
        std::mt19937 rng(9);
        const int64_t cols = shape.back();
        Case c;
        c.in = {values(t, shape, rng, -2, 2), values(t, shape, rng, -2, 2),
                values(t, {cols}, rng, 0.5, 1.5),
                values(t, {cols}, rng, -1, 1)};
        addStep(c, OpCode::Add, {0, 1}, t); // 4
        par::catalogue::FusedStep *last = norm == OpCode::LayerNorm
                                              ? addStep(c, norm, {4, 2, 3}, t)
                                              : addStep(c, norm, {4, 2}, t);
        last->attrs.epsilon = 1e-5;
        c.out = {{t, shape}};
        checkCase(*device, *reference, OpCode::Fused, c, accepted);
        if (HasFatalFailure())
          return;
        c.out.push_back({t, shape});
        checkCase(*device, *reference, OpCode::Fused, c, accepted);
        if (HasFatalFailure())
          return;
      }
  EXPECT_EQ(accepted, 32);
}

/// A fused group of every element-wise op the type takes, each op's
/// result depending on its operands' order and values (a broadcast, the
/// binary ops, the unary ops, a splat, a compare, a select and converts
/// through a narrower type and i1), on values that keep it finite.
Case everyOpCase(DType t, std::mt19937 &rng) {
  Case c;
  c.in = {values(t, {5, 7}, rng, 0.5, 4), values(t, {5, 7}, rng, 0.5, 4),
          values(t, {7}, rng, 0.5, 4)};
  int64_t next = 3;
  auto step = [&](OpCode op, std::vector<int64_t> args, DType type) {
    addStep(c, op, std::move(args), type);
    return next++;
  };
  const int64_t x = 0, y = 1;
  const int64_t b = step(OpCode::Broadcast, {2}, t);
  c.attrs.body.back().attrs.dims = {1};
  const int64_t sum = step(OpCode::Add, {x, b}, t);
  int64_t acc = step(OpCode::Mul, {sum, y}, t);
  acc = step(OpCode::Div, {acc, b}, t);
  acc = step(OpCode::Max, {acc, y}, t);
  acc = step(OpCode::Min, {acc, sum}, t);
  acc = step(OpCode::Sub, {acc, y}, t);
  // Relu first, so that every later op stays finite.
  const std::vector<OpCode> unary =
      isFloat(t) ? std::vector<OpCode>{OpCode::Relu, OpCode::Gelu,
                                       OpCode::Silu, OpCode::Sigmoid,
                                       OpCode::Tanh, OpCode::Exp, OpCode::Log,
                                       OpCode::Sqrt, OpCode::Rsqrt, OpCode::Neg}
                 : std::vector<OpCode>{OpCode::Relu, OpCode::Neg};
  for (OpCode op : unary)
    acc = step(op, {acc}, t);
  const int64_t splat = step(OpCode::Constant, {}, t);
  c.attrs.body.back().attrs.value = {isFloat(t) ? -1.3 : -1.0};
  const int64_t less = step(OpCode::Compare, {acc, splat}, DType::I1);
  c.attrs.body.back().attrs.compareDirection =
      par::catalogue::CompareDirection::Lt;
  acc = step(OpCode::Select, {less, acc, splat}, t);
  const int64_t narrow =
      step(OpCode::Convert, {acc}, t == DType::F32 ? DType::BF16 : DType::F32);
  const int64_t flag = step(OpCode::Convert, {narrow}, DType::I1);
  const int64_t back = step(OpCode::Convert, {flag}, t);
  step(OpCode::Add, {back, acc}, t);
  c.out = {{t, {5, 7}}};
  return c;
}

TEST_P(Conformance, CompiledFusedGroupsMatchInterpretedOnes) {
  if (!device)
    GTEST_SKIP() << missing;
  // On the CUDA backend an element-wise group runs as a kernel compiled
  // for it (PAR_CUDA_JIT=0: interpreted); both give the same bits, and the
  // CPU backend's values.
  struct Restore { // PAR_CUDA_JIT as it was, whatever ends the test
    std::optional<std::string> saved;
    Restore() {
      if (const char *given = std::getenv("PAR_CUDA_JIT"))
        saved = given;
    }
    ~Restore() {
      if (saved)
        setenv("PAR_CUDA_JIT", saved->c_str(), 1);
      else
        unsetenv("PAR_CUDA_JIT");
    }
  } restore;
  int accepted = 0;
  // The case checked against the CPU backend with its groups compiled,
  // then run compiled and interpreted.
  auto runBoth = [&](const Case &c) {
    setenv("PAR_CUDA_JIT", "1", 1);
    checkCase(*device, *reference, OpCode::Fused, c, accepted);
    std::pair<Outcome, Outcome> both{runCase(*device, OpCode::Fused, c), {}};
    setenv("PAR_CUDA_JIT", "0", 1);
    both.second = runCase(*device, OpCode::Fused, c);
    return both;
  };
#ifdef PAR_HAVE_CUDA_BACKEND
  const int64_t compiledBefore = par::rt::cudaCompiledFusedKernels();
#endif
  for (DType t : kTypes) {
    SCOPED_TRACE(std::string("every op on ") + dtypeName(t));
    std::mt19937 rng(21 + int(t));
    auto [compiled, interpreted] = runBoth(everyOpCase(t, rng));
    if (HasFatalFailure())
      return;
    ASSERT_FALSE(compiled.error.has_value()) << *compiled.error;
    ASSERT_FALSE(interpreted.error.has_value()) << *interpreted.error;
    const HostTensor &x = compiled.results[0], &y = interpreted.results[0];
    for (int64_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(x.get(i), y.get(i)) << "element " << i;
  }
  // Groups that keep what their reduce or norm reads: compiled, the kernel
  // stores the kept value and the unfused op reads it back.
#ifdef PAR_HAVE_CUDA_BACKEND
  const int64_t compiledBeforeKept = par::rt::cudaCompiledFusedKernels();
#endif
  for (DType t : {DType::F32, DType::BF16})
    for (OpCode last : {OpCode::Reduce, OpCode::LayerNorm, OpCode::RmsNorm})
      for (const par::rt::Shape &shape :
           {par::rt::Shape{3, 4, 40}, par::rt::Shape{5, 300}}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " +
                     par::catalogue::spec(last).name + " keeping rows of " +
                     std::to_string(shape.back()));
        std::mt19937 rng(17);
        const int64_t cols = shape.back();
        Case c;
        c.in = {values(t, shape, rng, -2, 2), values(t, shape, rng, -2, 2),
                values(t, {cols}, rng, 0.5, 1.5),
                values(t, {cols}, rng, -1, 1)};
        addStep(c, OpCode::Add, {0, 1}, t); // 4
        par::rt::Shape rows = shape;
        rows.pop_back();
        if (last == OpCode::Reduce) {
          par::catalogue::FusedStep *red = addStep(c, last, {4}, t);
          red->attrs.reduceKind = par::catalogue::ReduceKind::Sum;
          red->attrs.dims = {int64_t(shape.size()) - 1};
          red->shape = shape;
          c.out = {{t, rows}, {t, shape}};
        } else {
          (last == OpCode::LayerNorm ? addStep(c, last, {4, 2, 3}, t)
                                     : addStep(c, last, {4, 2}, t))
              ->attrs.epsilon = 1e-5;
          c.out = {{t, shape}, {t, shape}};
        }
        auto [compiled, interpreted] = runBoth(c);
        if (HasFatalFailure())
          return;
        ASSERT_FALSE(compiled.error.has_value()) << *compiled.error;
        ASSERT_FALSE(interpreted.error.has_value()) << *interpreted.error;
        for (size_t r = 0; r < 2; ++r)
          EXPECT_EQ(compiled.results[r].bytes, interpreted.results[r].bytes)
              << "result " << r;
      }
  EXPECT_EQ(accepted, 6 + 12);
#ifdef PAR_HAVE_CUDA_BACKEND
  // On the GPU the groups above must have run compiled, or nothing was
  // compared.
  if (GetParam() == "cuda" &&
      (compiledBeforeKept == compiledBefore ||
       par::rt::cudaCompiledFusedKernels() == compiledBeforeKept))
    GTEST_SKIP() << "no fused group (or no group keeping a value) was "
                    "compiled (NVRTC missing? par-run's note on stderr says "
                    "why): compiled groups untested";
#endif
}

/// Runs a batch of `op` updates (members `cases`) as one launchBatch on
/// `device`, the members sharing their last operands (the learning rate
/// and step buffers, as in a program) from the first case.
std::vector<Outcome> runBatch(Device &device, OpCode op,
                              const std::vector<Case> &cases,
                              size_t sharedOperands) {
  DeviceCopies copies(device);
  auto onDevice = [&](const HostTensor &h) { return copies.of(h); };
  std::vector<Tensor> shared;
  const Case &first = cases.front();
  for (size_t i = first.in.size() - sharedOperands; i < first.in.size(); ++i)
    shared.push_back(onDevice(first.in[i]));
  std::vector<BatchMember> members(cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    members[k].attrs = &cases[k].attrs;
    for (size_t i = 0; i + sharedOperands < cases[k].in.size(); ++i)
      members[k].in.push_back(onDevice(cases[k].in[i]));
    members[k].in.insert(members[k].in.end(), shared.begin(), shared.end());
    for (const auto &[dtype, shape] : cases[k].out)
      members[k].out.push_back(onDevice(HostTensor(dtype, shape, 0xff)));
  }
  std::vector<Outcome> outcomes(cases.size());
  try {
    device.launchBatch(op, members);
    device.synchronize();
    for (size_t k = 0; k < cases.size(); ++k)
      for (const Tensor &t : members[k].out) {
        HostTensor h(t.dtype, t.shape);
        device.copyOut(h.bytes.data(), t.data, h.bytes.size());
        outcomes[k].results.push_back(std::move(h));
      }
  } catch (const KernelError &e) {
    for (Outcome &o : outcomes)
      o.error = e.what();
  }
  return outcomes;
}

// A batch of updates (the multi-tensor optimizer) against each update on
// its own on the CPU backend: f32 members of several sizes (one past a
// launch's share of the grid, more members than one CUDA launch takes),
// an f64 member and one with a bf16 gradient (these take the one-by-one
// path), weight decay and momentum differing between members.
TEST_P(Conformance, BatchedUpdatesMatchOneByOne) {
  if (!device)
    GTEST_SKIP() << missing;
  for (OpCode op : {OpCode::Adamw, OpCode::Sgd}) {
    SCOPED_TRACE(par::catalogue::spec(op).name);
    std::mt19937 rng(31 + int(op));
    std::vector<Case> cases;
    for (size_t k = 0; k < 30; ++k) {
      // Member 1 is three pieces on CUDA (kBatchPiece), the last partial.
      Shape shape = k == 0   ? Shape{300, 200}
                    : k == 1 ? Shape{2 * (int64_t(1) << 20) + 70001}
                             : Shape{int64_t(k * 37 % 97 + 1)};
      DType t = k == 2 ? DType::F64 : DType::F32;
      DType grad = k == 3 ? DType::BF16 : t;
      Case c;
      c.in = {values(t, shape, rng, -1, 1), values(grad, shape, rng, -1, 1),
              values(t, shape, rng, -1, 1)};
      if (op == OpCode::Adamw) {
        c.in.push_back(values(t, shape, rng, 0, 1));
        c.in.push_back(scalar(DType::F32, 1e-2));
        c.in.push_back(scalar(DType::F32, 3));
        c.attrs.beta1 = 0.9;
        c.attrs.beta2 = 0.999;
        c.attrs.epsilon = 1e-8;
        c.attrs.weightDecay = k % 2 ? 0.0 : 0.1;
        c.out = {{t, shape}, {t, shape}, {t, shape}};
      } else {
        c.in.push_back(scalar(DType::F32, 0.5));
        c.attrs.momentum = 0.9;
        c.attrs.weightDecay = k % 2 ? 0.0 : 0.1;
        c.attrs.nesterov = k % 3 == 0;
        c.out = {{t, shape}, {t, shape}};
      }
      cases.push_back(std::move(c));
    }
    std::vector<Outcome> got =
        runBatch(*device, op, cases, op == OpCode::Adamw ? 2 : 1);
    for (size_t k = 0; k < cases.size(); ++k) {
      SCOPED_TRACE("member " + std::to_string(k));
      Outcome want = runCase(*reference, op, cases[k]);
      ASSERT_FALSE(want.error.has_value()) << *want.error;
      ASSERT_FALSE(got[k].error.has_value()) << *got[k].error;
      for (size_t r = 0; r < want.results.size(); ++r) {
        const HostTensor &g = got[k].results[r], &w = want.results[r];
        double tol = tolerance(g.dtype);
        for (int64_t i = 0; i < g.size(); ++i)
          ASSERT_LE(std::abs(g.get(i) - w.get(i)),
                    tol * std::max(1.0, std::abs(w.get(i))))
              << "result " << r << " element " << i;
      }
    }
  }
}

/// The sizes of an attention case: q [batch, seq, heads, dim], k and v
/// [batch, seq, kvHeads, dim].
struct AttentionSizes {
  int64_t batch, seq, heads, kvHeads, dim;
};

/// Attention and its two gradient ops on random operands of `t` (f32 row
/// statistics; the gradients' statistics random in [2, 3]: the backends
/// must agree on the same formula for any).
std::vector<std::pair<OpCode, Case>> attentionCases(DType t, std::mt19937 &rng,
                                                    const AttentionSizes &n,
                                                    bool causal,
                                                    int64_t positionOffset) {
  const Shape queries{n.batch, n.seq, n.heads, n.dim},
      keys{n.batch, n.seq, n.kvHeads, n.dim}, rows{n.batch, n.seq, n.heads};
  Case fwd;
  fwd.in = {values(t, queries, rng, -1, 1), values(t, keys, rng, -1, 1),
            values(t, keys, rng, -1, 1)};
  fwd.attrs.causal = causal;
  fwd.attrs.positionOffset = positionOffset;
  fwd.out = {{t, queries}, {DType::F32, rows}};
  Case grad;
  grad.in = {fwd.in[0],
             fwd.in[1],
             fwd.in[2],
             values(t, queries, rng, -1, 1),
             values(t, queries, rng, -1, 1),
             values(DType::F32, rows, rng, 2, 3)};
  grad.attrs = fwd.attrs;
  Case gradQ = grad, gradKv = grad;
  gradQ.out = {{t, queries}};
  gradKv.out = {{t, keys}, {t, keys}};
  return {{OpCode::Attention, fwd},
          {OpCode::AttentionGradQ, gradQ},
          {OpCode::AttentionGradKv, gradKv}};
}

// Shapes past the small cases' sizes, where the backends switch kernels:
// attention of several tiles (a partial last one, heads sharing KV heads,
// causal with an offset, heads of 40 and 80 wide), and reductions, softmax,
// norms and cross-entropy over long rows (a block per row).
TEST_P(Conformance, LargeShapesMatchTheCpuBackend) {
  if (!device)
    GTEST_SKIP() << missing;
  for (DType t : {DType::F32, DType::BF16}) {
    std::mt19937 rng(99 + int(t));
    std::vector<std::pair<OpCode, Case>> all;
    for (int64_t dim : {40, 80})
      for (bool causal : {true, false})
        for (auto &c : attentionCases(t, rng, {2, 150, 4, 2, dim}, causal,
                                      causal ? 3 : 0))
          all.push_back(c);
    for (auto [dims, shape, out] :
         std::vector<std::tuple<std::vector<int64_t>, Shape, Shape>>{
             {{0}, {1000, 37}, {37}},
             {{1}, {37, 1000}, {37}},
             {{0, 2}, {30, 5, 40}, {5}},
             {{0, 1}, {4, 256, 96}, {96}}})
      for (auto kind :
           {par::catalogue::ReduceKind::Sum, par::catalogue::ReduceKind::Max}) {
        Case c;
        c.in = {values(t, shape, rng, -2, 2)};
        c.attrs.reduceKind = kind;
        c.attrs.dims = dims;
        c.out = {{t, out}};
        all.push_back({OpCode::Reduce, c});
      }
    for (OpCode op : {OpCode::Softmax, OpCode::LogSoftmax}) {
      Case c;
      c.in = {values(t, {5, 3000}, rng, -4, 4)};
      c.attrs.dim = 1;
      c.out = {{t, {5, 3000}}};
      all.push_back({op, c});
    }
    Case norm;
    norm.in = {values(t, {7, 768}, rng, -2, 2), values(t, {768}, rng, 0.5, 1.5),
               values(t, {768}, rng, -1, 1)};
    norm.attrs.epsilon = 1e-5;
    norm.out = {{t, {7, 768}}};
    all.push_back({OpCode::LayerNorm, norm});
    norm.in.pop_back();
    all.push_back({OpCode::RmsNorm, norm});
    // An embedding's gradient: rows added at repeated ids (on CUDA a block
    // per 16 rows and 256 columns, ScatterRows.h).
    Case scatter;
    scatter.in = {values(t, {1000, 300}, rng, -2, 2),
                  ints(DType::I32, {3000, 1}, rng, 0, 999),
                  values(t, {3000, 300}, rng, -2, 2)};
    scatter.attrs.dims = {0};
    scatter.out = {{t, {1000, 300}}};
    all.push_back({OpCode::ScatterAdd, scatter});
    Case loss;
    loss.in = {values(t, {9, 5000}, rng, -3, 3),
               ints(DType::I32, {9}, rng, 0, 4999)};
    loss.out = {{DType::F32, {}}};
    all.push_back({OpCode::CrossEntropy, loss});
    for (const auto &[op, c] : all) {
      SCOPED_TRACE(std::string(par::catalogue::spec(op).name) + " with " +
                   dtypeName(t) + " at " +
                   std::to_string(c.in[0].shape.back()) + " wide");
      int accepted = 0;
      checkCase(*device, *reference, op, c, accepted);
      if (HasFatalFailure())
        return;
      EXPECT_EQ(accepted, 1) << "rejected";
    }
  }
}

// Attention on 16-bit heads of 64 and 128 (the tensor-core kernels' two
// tile widths on the CUDA backend; heads of 100 padded to 128), in bf16
// and f16, causal and not, KV heads shared by two query heads, more than
// one tile of rows and keys with a partial last one.
TEST_P(Conformance, SixteenBitAttentionMatchesTheCpuBackend) {
  if (!device)
    GTEST_SKIP() << missing;
#ifdef PAR_HAVE_CUDA_BACKEND
  const int64_t launchesBefore = par::rt::cudaTensorCoreAttentionLaunches();
#endif
  int cases = 0;
  for (DType t : {DType::BF16, DType::F16})
    for (int64_t dim : {64, 100, 128})
      for (bool causal : {true, false}) {
        std::mt19937 rng(unsigned(31 * dim + int(t) + causal));
        for (const auto &[op, c] :
             attentionCases(t, rng, {2, 130, 4, 2, dim}, causal, 0)) {
          SCOPED_TRACE(std::string(par::catalogue::spec(op).name) + " with " +
                       dtypeName(t) + ", heads of " + std::to_string(dim) +
                       (causal ? ", causal" : ""));
          int accepted = 0;
          checkCase(*device, *reference, op, c, accepted);
          if (HasFatalFailure())
            return;
          EXPECT_EQ(accepted, 1) << "rejected";
          ++cases;
        }
      }
#ifdef PAR_HAVE_CUDA_BACKEND
  // On a GPU of compute capability 8.0 or more, the tensor cores took every
  // call (checkCase runs each three times), unless turned off.
  const char *choice = std::getenv("PAR_CUDA_ATTENTION");
  if (GetParam() == "cuda" && !(choice && std::string(choice) == "simt"))
    EXPECT_EQ(par::rt::cudaTensorCoreAttentionLaunches() - launchesBefore,
              3 * cases)
        << "the tensor-core kernels did not take every call: a GPU below "
           "compute capability 8.0, a build for one, or too little shared "
           "memory a block?";
#endif
  (void)cases;
}

/// Dots of every operand layout the programs make: plain, either or both
/// operands stored transposed (read in place with the GEMM's transpose
/// flags), several contracting or free dims, batch dims, and layouts that
/// must be packed into a copy first (a batch dim not leading, a
/// contracting dim between free ones).
/// A dot of random operands in [-1, 1] of type `t`.
Case dotCase(DType t, std::mt19937 &rng, Shape lhs, Shape rhs,
             std::vector<int64_t> lb, std::vector<int64_t> rb,
             std::vector<int64_t> lc, std::vector<int64_t> rc, Shape out) {
  Case c;
  c.in = {values(t, lhs, rng, -1, 1), values(t, rhs, rng, -1, 1)};
  c.attrs.lhsBatch = lb;
  c.attrs.rhsBatch = rb;
  c.attrs.lhsContract = lc;
  c.attrs.rhsContract = rc;
  c.out = {{t, out}};
  return c;
}

std::vector<std::pair<std::string, Case>> dotLayouts(DType t,
                                                     std::mt19937 &rng) {
  std::vector<std::pair<std::string, Case>> all;
  auto add = [&](std::string name, Shape lhs, Shape rhs,
                 std::vector<int64_t> lb, std::vector<int64_t> rb,
                 std::vector<int64_t> lc, std::vector<int64_t> rc, Shape out) {
    all.push_back({name, dotCase(t, rng, lhs, rhs, lb, rb, lc, rc, out)});
  };
  add("plain", {33, 20}, {20, 17}, {}, {}, {1}, {0}, {33, 17});
  add("lhs transposed", {20, 33}, {20, 17}, {}, {}, {0}, {0}, {33, 17});
  add("rhs transposed", {33, 20}, {17, 20}, {}, {}, {1}, {1}, {33, 17});
  add("both transposed", {20, 33}, {17, 20}, {}, {}, {0}, {1}, {33, 17});
  // x [b, s, h] contracted over b and s with dy [b, s, o]: a weight's
  // gradient, the lhs stored [k..., m].
  add("two contracting dims", {3, 5, 7}, {3, 5, 9}, {}, {}, {0, 1}, {0, 1},
      {7, 9});
  // dy [b, s, o] times w [h, o]: two free dims, the rhs transposed.
  add("two free dims", {3, 5, 9}, {7, 9}, {}, {}, {2}, {1}, {3, 5, 7});
  add("batched, both transposed", {4, 6, 5}, {4, 3, 6}, {0}, {0}, {1}, {2},
      {4, 5, 3});
  add("batch dim not leading (packed)", {5, 4, 6}, {4, 6, 3}, {1}, {0}, {2},
      {1}, {4, 5, 3});
  add("contracting dim in the middle (packed)", {3, 6, 5}, {6, 7}, {}, {}, {1},
      {0}, {3, 5, 7});
  // Contracting dims listed out of order: the runs look swapped, but not at
  // the split between free and contracting dims.
  add("contracting dims out of order (packed)", {3, 4, 5}, {5, 3, 2}, {}, {},
      {2, 0}, {0, 1}, {4, 2});
  return all;
}

TEST_P(Conformance, DotLayoutsMatchTheCpuBackend) {
  if (!device)
    GTEST_SKIP() << missing;
  for (DType t : {DType::F32, DType::BF16}) {
    std::mt19937 rng(7 + int(t));
    for (const auto &[name, c] : dotLayouts(t, rng)) {
      SCOPED_TRACE(name + " in " + dtypeName(t));
      int accepted = 0;
      checkCase(*device, *reference, OpCode::Dot, c, accepted);
      if (HasFatalFailure())
        return;
      EXPECT_EQ(accepted, 1) << "rejected";
    }
  }
}

/// 16-bit GEMMs whose rows do not start on 16-byte boundaries (GPT-2's
/// 50,257-token vocabulary), large enough that the CUDA backend stages
/// them through padded copies in blocks of rows (Launch.h,
/// planGemmStaging; RuntimeCudaLaunchTest checks these shapes stage in two
/// blocks): the logits with the head stored [width, vocab] (B staged too)
/// and tied [vocab, width], the input's gradient (A staged), the weight's
/// gradient (A read transposed, staged by columns).
TEST_P(Conformance, StagedSixteenBitGemmsMatchTheCpuBackend) {
  if (!device)
    GTEST_SKIP() << missing;
  if (std::string(GetParam()) == "cpu")
    GTEST_SKIP() << "only the CUDA backend stages GEMMs (40 s of CPU "
                    "products that would check the CPU against itself)";
  const int64_t tokens = 1500, width = 32, vocab = 50257;
  for (DType t : {DType::BF16, DType::F16}) {
    std::mt19937 rng(11 + int(t));
    std::vector<std::pair<std::string, Case>> all;
    auto add = [&](std::string name, Shape lhs, Shape rhs,
                   std::vector<int64_t> lc, std::vector<int64_t> rc,
                   Shape out) {
      all.push_back({name, dotCase(t, rng, lhs, rhs, {}, {}, lc, rc, out)});
    };
    add("logits", {tokens, width}, {width, vocab}, {1}, {0}, {tokens, vocab});
    add("logits, tied head", {tokens, width}, {vocab, width}, {1}, {1},
        {tokens, vocab});
    add("input gradient", {tokens, vocab}, {vocab, width}, {1}, {0},
        {tokens, width});
    add("weight gradient", {tokens, vocab}, {tokens, width}, {0}, {0},
        {vocab, width});
    for (const auto &[name, c] : all) {
      SCOPED_TRACE(name + " in " + dtypeName(t));
      int accepted = 0;
      checkCase(*device, *reference, OpCode::Dot, c, accepted);
      if (HasFatalFailure())
        return;
      EXPECT_EQ(accepted, 1) << "rejected";
    }
  }
}

TEST(ConformanceBackends, UnknownBackendIsAClearError) {
  try {
    createDevice("tpu");
    FAIL() << "no error";
  } catch (const DeviceError &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "backend 'tpu' is not built into this runtime"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos);
  }
}

#ifdef PAR_HAVE_CUDA_BACKEND
// No compute op falls back to the host as a whole (a call a kernel does
// not take still may): checked from the table, so without a GPU too.
TEST(ConformanceBackends, CudaHasAKernelForEveryComputeOp) {
  for (int i = 0; i < par::catalogue::kNumOps; ++i) {
    const par::catalogue::OpSpec &spec = par::catalogue::kOps[i];
    if (!spec.usesGroup)
      EXPECT_TRUE(cudaNative(spec.code))
          << spec.name << " runs on the host on the CUDA backend";
  }
}

/// The scratch the CUDA table sets aside for a launch, from the shapes
/// alone (no GPU needed): a dot's packed operands (none where it reads an
/// operand transposed in place) on a 256-byte boundary before cuBLASLt's
/// workspace, a token's double for cross-entropy, the result in its
/// compute type for scatter-add (none for whole rows), a double per chunk
/// and result for a reduction over columns.
TEST(ConformanceBackends, CudaScratchSizesFollowTheLaunches) {
  const KernelTable &table = cudaKernels();
  ASSERT_NE(table.reserveScratch, nullptr);
  std::mt19937 rng(3);
  // Tensors that point somewhere (the checks want data) but are never read.
  static char nowhere;
  auto scratchOf = [&](OpCode op, const Case &c) {
    std::vector<Tensor> in, out;
    for (const HostTensor &h : c.in)
      in.push_back(Tensor{h.dtype, h.shape, &nowhere});
    for (const auto &[dtype, shape] : c.out)
      out.push_back(Tensor{dtype, shape, &nowhere});
    return table.scratchBytes(op, c.attrs, in, out);
  };
  std::map<std::string, size_t> dot;
  for (const auto &[name, c] : dotLayouts(DType::F32, rng))
    dot[name] = scratchOf(OpCode::Dot, c);
  const size_t workspace = dot.at("plain");
  EXPECT_GE(workspace, size_t(1) << 20);
  for (const char *inPlace :
       {"lhs transposed", "rhs transposed", "both transposed",
        "two contracting dims", "two free dims", "batched, both transposed"})
    EXPECT_EQ(dot.at(inPlace), workspace) << inPlace << " packs an operand";
  // lhs [5, 4, 6] f32 (480 bytes) packed, rounded up to 512.
  EXPECT_EQ(dot.at("batch dim not leading (packed)"), workspace + 512);
  // lhs [3, 6, 5] f32 (360 bytes) packed, rounded up to 512.
  EXPECT_EQ(dot.at("contracting dim in the middle (packed)"), workspace + 512);
  // lhs [3, 4, 5] f32 (240 bytes) packed, rounded up to 256.
  EXPECT_EQ(dot.at("contracting dims out of order (packed)"), workspace + 256);
  Case empty;
  empty.in = {HostTensor(DType::F32, {3, 0}), HostTensor(DType::F32, {0, 4})};
  empty.attrs.lhsContract = {1};
  empty.attrs.rhsContract = {0};
  empty.out = {{DType::F32, {3, 4}}};
  EXPECT_EQ(scratchOf(OpCode::Dot, empty), 0u) << "a dot with k = 0 fills";

  Case loss;
  loss.in = {HostTensor(DType::BF16, {9, 50}), HostTensor(DType::I32, {9})};
  loss.out = {{DType::F32, {}}};
  EXPECT_EQ(scratchOf(OpCode::CrossEntropy, loss), 9 * sizeof(double));
  Case scatter;
  scatter.in = {HostTensor(DType::BF16, {10, 4}), HostTensor(DType::I32, {3}),
                HostTensor(DType::BF16, {3, 4})};
  scatter.out = {{DType::BF16, {10, 4}}};
  EXPECT_EQ(scratchOf(OpCode::ScatterAdd, scatter), 40 * sizeof(float));
  scatter.in[0] = HostTensor(DType::F64, {10, 4});
  scatter.in[2] = HostTensor(DType::F64, {3, 4});
  scatter.out = {{DType::F64, {10, 4}}};
  EXPECT_EQ(scratchOf(OpCode::ScatterAdd, scatter), 40 * sizeof(double));
  // A bias gradient, [8, 1024, 768] summed over the tokens: 24 tiles of 32
  // results by 44 chunks of the 8,192 tokens, a double per chunk and
  // result; the same sum as the end of a fused group.
  Case bias;
  bias.in = {HostTensor(DType::BF16, {8, 1024, 768})};
  bias.attrs.reduceKind = par::catalogue::ReduceKind::Sum;
  bias.attrs.dims = {0, 1};
  bias.out = {{DType::BF16, {768}}};
  EXPECT_EQ(scratchOf(OpCode::Reduce, bias), 44 * 768 * sizeof(double));
  Case group;
  group.in = {HostTensor(DType::BF16, {8, 1024, 768}),
              HostTensor(DType::BF16, {8, 1024, 768})};
  addStep(group, OpCode::Mul, {0, 1}, DType::BF16);
  par::catalogue::FusedStep *sum =
      addStep(group, OpCode::Reduce, {2}, DType::BF16);
  sum->attrs.reduceKind = par::catalogue::ReduceKind::Sum;
  sum->attrs.dims = {0, 1};
  sum->shape = {8, 1024, 768};
  group.out = {{DType::BF16, {768}}};
  EXPECT_EQ(scratchOf(OpCode::Fused, group), 44 * 768 * sizeof(double));
  // Row sums and short columns take the other kernels: no scratch.
  bias.attrs.dims = {2};
  bias.out = {{DType::BF16, {8, 1024}}};
  EXPECT_EQ(scratchOf(OpCode::Reduce, bias), 0u);
  // An embedding's gradient, rows at the ids: accumulated in shared
  // memory, no scratch.
  Case rows;
  rows.in = {HostTensor(DType::F32, {50257, 768}),
             HostTensor(DType::I32, {8192, 1}),
             HostTensor(DType::F32, {8192, 768})};
  rows.attrs.dims = {0};
  rows.out = {{DType::F32, {50257, 768}}};
  EXPECT_EQ(scratchOf(OpCode::ScatterAdd, rows), 0u);
  Case add;
  add.in = {HostTensor(DType::F32, {4}), HostTensor(DType::F32, {4})};
  add.out = {{DType::F32, {4}}};
  EXPECT_EQ(scratchOf(OpCode::Add, add), 0u);
}

/// The host side of a one-rank world: every group has one member, and a
/// host collective gives its operand back (what NCCL's communicators are
/// bootstrapped through).
class OneRankHost final : public Collectives {
public:
  int64_t worldRank() const override { return 0; }
  int64_t worldSize() const override { return 1; }
  int64_t memberIndex(int64_t) const override { return 0; }
  int64_t memberCount(int64_t) const override { return 1; }
  std::vector<int64_t> memberShape(int64_t) const override { return {1}; }
  void allReduce(int64_t, ReduceOp, const Tensor &input, Tensor &out,
                 Stream) override {
    if (out.data != input.data)
      std::memcpy(out.data, input.data, input.bytes());
  }
  void allGather(int64_t, int64_t, const Tensor &, Tensor &, Stream) override {
    unexpected();
  }
  void reduceScatter(int64_t, ReduceOp, int64_t, const Tensor &, Tensor &,
                     Stream) override {
    unexpected();
  }
  void allToAll(int64_t, int64_t, int64_t, const Tensor &, Tensor &,
                Stream) override {
    unexpected();
  }
  void permute(int64_t, const std::vector<std::pair<int64_t, int64_t>> &,
               const Tensor &, Tensor &, Stream) override {
    unexpected();
  }
  void exchange(int64_t, const std::vector<int64_t> &, const void *,
                const std::vector<int64_t> &, void *) override {
    unexpected();
  }
  std::unique_ptr<Transfer> send(int64_t, int64_t, const Tensor &) override {
    unexpected();
  }
  std::unique_ptr<Transfer> recv(int64_t, int64_t, Tensor &) override {
    unexpected();
  }
  std::vector<std::string> gatherToRoot(const std::string &bytes) override {
    return {bytes};
  }
  void barrier() override {}
  void agree(std::vector<int64_t> &, ReduceOp) override {}

private:
  [[noreturn]] static void unexpected() {
    throw CommError("a device collective went to the host communicator");
  }
};

// NCCL with one rank (NCCL refuses two ranks on one GPU, so this is what a
// one-GPU machine can check): one communicator per group, and every
// collective, a split or joined layout's rearrangement included, gives its
// operand back.
TEST(ConformanceBackends, NcclOneRankCollectivesGiveTheirOperand) {
  if (!ncclBuiltIn())
    GTEST_SKIP() << "this runtime was built without NCCL";
  std::unique_ptr<Device> gpu;
  try {
    gpu = createDevice("cuda");
  } catch (const DeviceError &e) {
    GTEST_SKIP() << e.what();
  }
  std::unique_ptr<Collectives> nccl =
      createDeviceCollectives(std::make_unique<OneRankHost>(), *gpu, 2);
  std::mt19937 rng(11);
  for (DType t : {DType::F32, DType::BF16, DType::I64}) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor host = values(t, {4, 6, 2}, rng, -5, 5);
    const size_t bytes = host.bytes.size();
    void *in = gpu->allocate(bytes, 64), *out = gpu->allocate(bytes, 64);
    gpu->copyIn(in, host.bytes.data(), bytes);
    Tensor input{t, host.shape, in}, result{t, host.shape, out};
    auto expect = [&](const char *what, bool zeros = false) {
      gpu->synchronize();
      HostTensor got(t, host.shape);
      gpu->copyOut(got.bytes.data(), out, bytes);
      EXPECT_EQ(got.bytes, zeros ? HostTensor(t, host.shape).bytes : host.bytes)
          << what;
      gpu->fill(out, 0xff, bytes);
    };
    nccl->allReduce(0, ReduceOp::Sum, input, result, gpu->commStream());
    expect("all_reduce sum");
    nccl->allReduce(1, ReduceOp::Max, input, result, gpu->commStream());
    expect("all_reduce max (group 1)");
    for (int64_t dim : {0, 1, 2}) {
      nccl->allGather(0, dim, input, result, gpu->commStream());
      expect("all_gather");
      nccl->reduceScatter(0, ReduceOp::Sum, dim, input, result,
                          gpu->commStream());
      expect("reduce_scatter");
      nccl->allToAll(0, dim, (dim + 1) % 3, input, result, gpu->commStream());
      expect("all_to_all");
    }
    nccl->permute(0, {{0, 0}}, input, result, gpu->commStream());
    expect("permute to itself");
    nccl->permute(0, {}, input, result, gpu->commStream());
    expect("permute to no one", /*zeros=*/true);
    gpu->release(in);
    gpu->release(out);
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Backends, Conformance,
                         ::testing::ValuesIn(availableBackends()),
                         [](const auto &info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(
    Ops, ConformanceOp,
    ::testing::Combine(::testing::ValuesIn(availableBackends()),
                       ::testing::ValuesIn(caseOps())),
    [](const auto &info) {
      return std::get<0>(info.param) + "_" +
             par::catalogue::spec(std::get<1>(info.param)).name;
    });

} // namespace
