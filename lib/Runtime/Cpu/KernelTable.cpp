//===- KernelTable.cpp - The CPU backend's kernel for each op -------------===//

#include "par/Runtime/KernelTable.h"

#include <cmath>
#include <string>

namespace par::rt {

using catalogue::Attrs;
using catalogue::OpCode;

namespace {

using Tensors = std::vector<Tensor>;

template <BinaryKind kind>
void binaryKernel(Stream, const Attrs &, const Tensors &in, Tensors &out) {
  binary(kind, in[0], in[1], out[0]);
}

template <UnaryKind kind>
void unaryKernel(Stream, const Attrs &, const Tensors &in, Tensors &out) {
  unary(kind, in[0], out[0]);
}

void constantKernel(Stream, const Attrs &a, const Tensors &, Tensors &out) {
  Tensor &result = out[0];
  if (a.value.size() == 1) {
    fill(result, a.value[0]);
    return;
  }
  if (int64_t(a.value.size()) != result.size())
    throw KernelError("constant: " + std::to_string(a.value.size()) +
                      " values for a tensor of " +
                      std::to_string(result.size()) + " elements");
  for (size_t i = 0; i < a.value.size(); ++i)
    storeElement(result.dtype, result.data, int64_t(i), a.value[i]);
}

void sliceKernel(Stream, const Attrs &a, const Tensors &in, Tensors &out) {
  std::vector<int64_t> strides = a.strides;
  if (strides.empty())
    strides.assign(a.starts.size(), 1);
  slice(in[0], a.starts, strides, out[0]);
}

/// The runtime position offset (the attribute plus the optional 0-d operand
/// at `operand`) and the scale of an attention-shaped op.
std::pair<int64_t, float> attentionPositions(const char *op, const Attrs &a,
                                             const Tensors &in,
                                             size_t operand) {
  int64_t offset = a.positionOffset;
  if (in.size() > operand)
    offset += int64_t(scalarValue(in[operand]));
  if (in[0].shape.size() != 4)
    throw KernelError(std::string(op) +
                      ": q must be [batch, seq, heads, head_dim]");
  float scale = a.scale ? float(*a.scale)
                        : float(1.0 / std::sqrt(double(in[0].shape[3])));
  return {offset, scale};
}

void attentionKernel(Stream, const Attrs &a, const Tensors &in, Tensors &out) {
  auto [offset, scale] = attentionPositions("attention", a, in, 3);
  attention(in[0], in[1], in[2], a.causal, scale, offset, out[0],
            out.size() > 1 ? &out[1] : nullptr);
}

void attentionGradQKernel(Stream, const Attrs &a, const Tensors &in,
                          Tensors &out) {
  auto [offset, scale] = attentionPositions("attention_grad_q", a, in, 6);
  attentionGradQ(in[0], in[1], in[2], in[3], in[4], in[5], a.causal, scale,
                 offset, out[0]);
}

void attentionGradKvKernel(Stream, const Attrs &a, const Tensors &in,
                           Tensors &out) {
  auto [offset, scale] = attentionPositions("attention_grad_kv", a, in, 6);
  attentionGradKv(in[0], in[1], in[2], in[3], in[4], in[5], a.causal, scale,
                  offset, out[0], out[1]);
}

void ropeKernel(Stream, const Attrs &a, const Tensors &in, Tensors &out) {
  int64_t offset = a.positionOffset;
  if (in.size() > 1)
    offset += int64_t(scalarValue(in[1]));
  rope(in[0], float(a.theta), offset, out[0]);
}

/// A batch's members as the batch kernels take them.
template <typename Fn> void runBatch(std::vector<BatchMember> &members, Fn fn) {
  std::vector<const Attrs *> attrs;
  std::vector<Tensors> in, out;
  for (BatchMember &member : members) {
    attrs.push_back(member.attrs);
    in.push_back(member.in);
    out.push_back(member.out);
  }
  fn(attrs, in, out);
}

KernelTable build() {
  KernelTable t;
  t.backend = "cpu";
  auto set = [&](OpCode op, Kernel kernel) { t.kernels[size_t(op)] = kernel; };
  set(OpCode::Add, binaryKernel<BinaryKind::Add>);
  set(OpCode::Sub, binaryKernel<BinaryKind::Sub>);
  set(OpCode::Mul, binaryKernel<BinaryKind::Mul>);
  set(OpCode::Div, binaryKernel<BinaryKind::Div>);
  set(OpCode::Max, binaryKernel<BinaryKind::Max>);
  set(OpCode::Min, binaryKernel<BinaryKind::Min>);
  set(OpCode::Neg, unaryKernel<UnaryKind::Neg>);
  set(OpCode::Exp, unaryKernel<UnaryKind::Exp>);
  set(OpCode::Log, unaryKernel<UnaryKind::Log>);
  set(OpCode::Tanh, unaryKernel<UnaryKind::Tanh>);
  set(OpCode::Sqrt, unaryKernel<UnaryKind::Sqrt>);
  set(OpCode::Rsqrt, unaryKernel<UnaryKind::Rsqrt>);
  set(OpCode::Gelu, unaryKernel<UnaryKind::Gelu>);
  set(OpCode::Silu, unaryKernel<UnaryKind::Silu>);
  set(OpCode::Relu, unaryKernel<UnaryKind::Relu>);
  set(OpCode::Sigmoid, unaryKernel<UnaryKind::Sigmoid>);
  set(OpCode::Compare,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        compare(a.compareDirection, in[0], in[1], out[0]);
      });
  set(OpCode::Select,
      [](Stream, const Attrs &, const Tensors &in, Tensors &out) {
        select(in[0], in[1], in[2], out[0]);
      });
  set(OpCode::Convert, [](Stream, const Attrs &, const Tensors &in,
                          Tensors &out) { convert(in[0], out[0]); });
  set(OpCode::Constant, constantKernel);
  set(OpCode::Fused,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        fused(a.body, in, out[0], out.size() > 1 ? &out[1] : nullptr);
      });
  set(OpCode::Broadcast,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        broadcast(in[0], a.dims, out[0]);
      });
  set(OpCode::Reduce,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        reduce(a.reduceKind, in[0], a.dims, out[0]);
      });
  set(OpCode::Transpose,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        transpose(in[0], a.perm, out[0]);
      });
  set(OpCode::Reshape, [](Stream, const Attrs &, const Tensors &in,
                          Tensors &out) { reshape(in[0], out[0]); });
  set(OpCode::Slice, sliceKernel);
  set(OpCode::Pad, [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
    pad(in[0], a.low, a.high, a.interior, a.fill, out[0]);
  });
  set(OpCode::Concat, [](Stream, const Attrs &a, const Tensors &in,
                         Tensors &out) { concat(in, a.dim, out[0]); });
  set(OpCode::Dot, [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
    dot(in[0], in[1], a.lhsBatch, a.rhsBatch, a.lhsContract, a.rhsContract,
        out[0]);
  });
  set(OpCode::Softmax, [](Stream, const Attrs &a, const Tensors &in,
                          Tensors &out) { softmax(in[0], a.dim, out[0]); });
  set(OpCode::Argmax,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        argReduce(in[0], a.dim, /*max=*/true, out[0]);
      });
  set(OpCode::Argmin,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        argReduce(in[0], a.dim, /*max=*/false, out[0]);
      });
  set(OpCode::LogSoftmax,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        logSoftmax(in[0], a.dim, out[0]);
      });
  set(OpCode::LayerNorm,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        layerNorm(in[0], in[1], in[2], float(a.epsilon), out[0]);
      });
  set(OpCode::RmsNorm,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        rmsNorm(in[0], in[1], float(a.epsilon), out[0]);
      });
  set(OpCode::Attention, attentionKernel);
  set(OpCode::AttentionGradQ, attentionGradQKernel);
  set(OpCode::AttentionGradKv, attentionGradKvKernel);
  set(OpCode::Embedding, [](Stream, const Attrs &, const Tensors &in,
                            Tensors &out) { embedding(in[0], in[1], out[0]); });
  set(OpCode::ScatterAdd,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        scatterAdd(in[0], in[1], in[2], a.dims, out[0]);
      });
  set(OpCode::Gather,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        gather(in[0], in[1], a.dims, out[0]);
      });
  set(OpCode::CrossEntropy,
      [](Stream, const Attrs &, const Tensors &in, Tensors &out) {
        crossEntropy(in[0], in[1], out[0]);
      });
  set(OpCode::Rope, ropeKernel);
  set(OpCode::Adamw,
      [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
        adamw(in[0], in[1], in[2], in[3], in[4], in[5], float(a.beta1),
              float(a.beta2), float(a.epsilon), float(a.weightDecay), out[0],
              out[1], out[2]);
      });
  set(OpCode::Sgd, [](Stream, const Attrs &a, const Tensors &in, Tensors &out) {
    if (in.size() == 3 && out.size() == 1)
      return sgd(in[0], in[1], in[2], float(a.weightDecay), out[0]);
    if (in.size() != 4 || out.size() != 2)
      throw KernelError(
          "sgd: a momentum buffer operand goes with a new momentum "
          "result (" +
          std::to_string(in.size()) + " operands, " +
          std::to_string(out.size()) + " results)");
    sgd(in[0], in[1], in[2], in[3], float(a.momentum), float(a.weightDecay),
        a.nesterov, out[0], out[1]);
  });
  // Batches of updates: one parallel loop over every member's elements.
  t.batched[size_t(OpCode::Adamw)] = [](Stream,
                                        std::vector<BatchMember> &members) {
    runBatch(members, adamwBatch);
  };
  t.batched[size_t(OpCode::Sgd)] = [](Stream,
                                      std::vector<BatchMember> &members) {
    runBatch(members, sgdBatch);
  };
  return t;
}

} // namespace

const KernelTable &cpuKernels() {
  static const KernelTable table = build();
  return table;
}

} // namespace par::rt
