//===- Kernels.h - CPU kernels for the par op catalogue ---------*- C++ -*-===//
//
// One kernel per op of the catalogue, on dense row-major tensors. Float
// tensors may be stored as f32, f64, bf16 or f16; kernels read them into f32
// (f64 stays f64 where noted), accumulate in f32 and round once when storing.
// Integer tensors (ids, labels, masks) are i32, i64 or i1. Output tensors are
// preallocated by the caller with the right shape and type; kernels check
// shapes and types and throw KernelError with the op name on a mismatch.
// GEMMs go through OpenBLAS (cblas_sgemm).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_KERNELS_H
#define PAR_RUNTIME_KERNELS_H

#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/KernelMath.h"
#include "par/Runtime/Tensor.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace par::rt {

// BinaryKind, UnaryKind, CompareKind: ElementMath.h; ReduceKind: KernelMath.h.

// Elementwise. Binary/unary ops accept float and integer types (int division
// truncates; exp/log/... on integers is a KernelError); all operands share
// the output's type and shape.
void binary(BinaryKind kind, const Tensor &lhs, const Tensor &rhs, Tensor &out);
void unary(UnaryKind kind, const Tensor &input, Tensor &out);
/// `out` is i1 of the operands' shape.
void compare(CompareKind kind, const Tensor &lhs, const Tensor &rhs,
             Tensor &out);
/// `pred` is i1; on_true/on_false/out share type and shape.
void select(const Tensor &pred, const Tensor &onTrue, const Tensor &onFalse,
            Tensor &out);
void convert(const Tensor &input, Tensor &out);

// Structural (any element type; data is moved, not converted).
/// Operand dim i goes to result dim dims[i] (size equal, or 1 = expanded).
void broadcast(const Tensor &input, const std::vector<int64_t> &dims,
               Tensor &out);
/// Removes `dims` (sorted or not) by reducing over them. Mean divides by the
/// product of the reduced sizes.
void reduce(ReduceKind kind, const Tensor &input,
            const std::vector<int64_t> &dims, Tensor &out);
/// out dim i = input dim perm[i].
void transpose(const Tensor &input, const std::vector<int64_t> &perm,
               Tensor &out);
/// Copies element-count-preserving data (row-major order unchanged).
void reshape(const Tensor &input, Tensor &out);
/// out[i...] = input[starts + i * strides]; out's shape gives the extent.
void slice(const Tensor &input, const std::vector<int64_t> &starts,
           const std::vector<int64_t> &strides, Tensor &out);
/// out = `fill` (an integer type takes an infinity as its extreme) with
/// input[i...] at low + i * (interior + 1) per dim; `interior` empty means
/// none.
void pad(const Tensor &input, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high,
         const std::vector<int64_t> &interior, double fill, Tensor &out);
void concat(const std::vector<Tensor> &inputs, int64_t dim, Tensor &out);
/// Fills `out` with `value` (splat constant).
void fill(Tensor &out, double value);

/// A fused group (par.fused): `steps` evaluated element by element from
/// `inputs` into `out`, each step rounded to its element type as the
/// unfused op's result would be, so the result equals the unfused ops'.
/// Steps are element-wise ops, broadcasts of an input or a constant, and
/// splat constants, and may end in a reduce or a normalization (layer_norm,
/// rms_norm) of the value the steps before it compute
/// (docs/program-format.md, "Fused groups"); such a group also stores
/// that value in `kept` when given. A group may instead start with a dot
/// of two inputs (its producer): the GEMM writes `out`, and the steps
/// after it run over `out` in place.
void fused(const std::vector<catalogue::FusedStep> &steps,
           const std::vector<Tensor> &inputs, Tensor &out,
           Tensor *kept = nullptr);
/// A producer dot's group (steps[0] a dot) checked against its `inputs`
/// and `out`: the inputs its later steps read, the dot's value (`out`)
/// after the group's own, numbered as the dot step's value.
std::vector<Tensor>
producedInputs(const std::vector<catalogue::FusedStep> &steps,
               const std::vector<Tensor> &inputs, const Tensor &out);

// Contraction. Result dims: batch dims (in lhsBatch order), lhs free dims,
// rhs free dims, each in operand order. Float types only.
void dot(const Tensor &lhs, const Tensor &rhs,
         const std::vector<int64_t> &lhsBatch,
         const std::vector<int64_t> &rhsBatch,
         const std::vector<int64_t> &lhsContract,
         const std::vector<int64_t> &rhsContract, Tensor &out);

// Neural-network ops (float types; ids/labels i32 or i64).
void softmax(const Tensor &input, int64_t dim, Tensor &out);
/// x - max - log(sum(exp(x - max))) along `dim`.
void logSoftmax(const Tensor &input, int64_t dim, Tensor &out);
/// The index along `dim` of the largest (`max`) or smallest element of each
/// row, the first on ties, the first NaN if any; `out` (i32 or i64) is the
/// input without `dim`.
void argReduce(const Tensor &input, int64_t dim, bool max, Tensor &out);
/// Over the last dim; gamma/beta are 1-D of that size.
void layerNorm(const Tensor &input, const Tensor &gamma, const Tensor &beta,
               float epsilon, Tensor &out);
void rmsNorm(const Tensor &input, const Tensor &gamma, float epsilon,
             Tensor &out);
/// q [B, S, H, D], k/v [B, T, Hkv, D]; query head h reads KV head
/// h / (H / Hkv). With `causal`, query position s + positionOffset sees keys
/// t <= s + positionOffset. out has q's shape.
/// With `stats` (f32 [B, S, H]), also each query row's log-sum-exp of its
/// scaled, visible scores (-inf when it sees no key).
void attention(const Tensor &q, const Tensor &k, const Tensor &v, bool causal,
               float scale, int64_t positionOffset, Tensor &out,
               Tensor *stats = nullptr);
/// The gradients of `attention(q, k, v, ...) = out` given the gradient of
/// its result and its `stats`: dQ (q's type), and dK, dV (k's type).
void attentionGradQ(const Tensor &q, const Tensor &k, const Tensor &v,
                    const Tensor &out, const Tensor &gradOut,
                    const Tensor &stats, bool causal, float scale,
                    int64_t positionOffset, Tensor &gradQ);
void attentionGradKv(const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor &out, const Tensor &gradOut,
                     const Tensor &stats, bool causal, float scale,
                     int64_t positionOffset, Tensor &gradK, Tensor &gradV);
/// out[i..., :] = table[ids[i...], :]; ids outside [0, V) give zeros.
void embedding(const Tensor &table, const Tensor &ids, Tensor &out);
/// out = operand, then for each entry e of indices [N..., k] whose k
/// coordinates (along the operand dims `dims`) are in range, the slice of
/// updates [N..., rest] at e is added into the operand slice they select;
/// duplicates add. Numeric types; accumulation in f32 (f64, integers exact).
void scatterAdd(const Tensor &operand, const Tensor &indices,
                const Tensor &updates, const std::vector<int64_t> &dims,
                Tensor &out);
/// The counterpart of scatterAdd: out [entries..., non-indexed dims] holds
/// the operand's slice at each entry's coordinates, zeros for coordinates
/// outside the operand.
void gather(const Tensor &operand, const Tensor &indices,
            const std::vector<int64_t> &dims, Tensor &out);
/// Mean over tokens of logsumexp(logits[t, :]) - logits[t, labels[t]];
/// out is 0-d. Labels outside [0, V) are a KernelError.
void crossEntropy(const Tensor &logits, const Tensor &labels, Tensor &out);
/// x [B, S, H, D], D even; position p = s + positionOffset rotates
/// (x[i], x[i + D/2]) by p * theta^(-2i/D).
void rope(const Tensor &input, float theta, int64_t positionOffset,
          Tensor &out);

// Optimizers (lr 0-d float, step 0-d int or float, 1-based).
void adamw(const Tensor &param, const Tensor &grad, const Tensor &m,
           const Tensor &v, const Tensor &lr, const Tensor &step, float beta1,
           float beta2, float epsilon, float weightDecay, Tensor &newParam,
           Tensor &newM, Tensor &newV);
/// Plain SGD (no momentum, no state): newParam = param - lr (grad + wd param).
void sgd(const Tensor &param, const Tensor &grad, const Tensor &lr,
         float weightDecay, Tensor &newParam);
void sgd(const Tensor &param, const Tensor &grad, const Tensor &momentumBuf,
         const Tensor &lr, float momentum, float weightDecay, bool nesterov,
         Tensor &newParam, Tensor &newMomentum);

/// Several updates of one optimizer as one parallel loop over all their
/// elements (a program's batch of adamw or sgd instructions): update k
/// reads in[k] (the operands of adamw or sgd, in order), writes out[k],
/// with attrs[k] its hyperparameters. No update may write memory another
/// reads or writes. Each element is computed as adamw() / sgd() compute it.
void adamwBatch(const std::vector<const catalogue::Attrs *> &attrs,
                const std::vector<std::vector<Tensor>> &in,
                std::vector<std::vector<Tensor>> &out);
void sgdBatch(const std::vector<const catalogue::Attrs *> &attrs,
              const std::vector<std::vector<Tensor>> &in,
              std::vector<std::vector<Tensor>> &out);

//===----------------------------------------------------------------------===//
// Checks and plans shared by the backends
//===----------------------------------------------------------------------===//
//
// What a kernel decides before it touches data: whether its operands are
// valid (a KernelError naming the op otherwise) and, where it needs one,
// the plan of its loops. The CPU kernels above run them first; another
// backend runs the same ones on its host side before it launches, so every
// backend accepts and rejects exactly the same calls.

/// A strided gather: result element at multi-index idx (row-major) reads
/// input element offset + sum_d idx[d] * srcStrides[d].
struct GatherPlan {
  int64_t offset = 0;
  std::vector<int64_t> srcStrides;
};
GatherPlan planBroadcast(const Tensor &input, const std::vector<int64_t> &dims,
                         const Tensor &out);
GatherPlan planTranspose(const Tensor &input, const std::vector<int64_t> &perm,
                         const Tensor &out);
GatherPlan planSlice(const Tensor &input, const std::vector<int64_t> &starts,
                     const std::vector<int64_t> &strides, const Tensor &out);
void checkReshape(const Tensor &input, const Tensor &out);

/// How a fused group's values are computed: per value (the inputs, then one
/// per step) the element type registers hold it in (f32 for bf16/f16/f32,
/// f64, i64, i32, i1), its own element type, and how it is read: in place
/// (an input of the group's shape), gathered (a broadcast of an input:
/// `gather` and the input it reads), a splat (constants and broadcasts of
/// them: `splat` holds one element of the value's type), computed,
/// reduced (a reduce ending the group, of value `result`), or normalized
/// (a layer_norm or rms_norm ending the group, of value `result` by rows
/// of its last dim, its scales inputs of the group). The group's elements
/// range over `shape`: the result's, or what that reduce reads.
struct FusedPlan {
  enum class Source { Input, Gather, Splat, Step, Reduce, Norm };
  struct Value {
    DType compute = DType::F32, storage = DType::F32;
    Source source = Source::Step;
    int64_t input = -1; // Input, Gather: the input it reads
    bool direct = false; // Input: of the group's shape, read in place
    GatherPlan gather;
    uint64_t splat = 0;
  };
  std::vector<Value> values;
  int64_t numInputs = 0;
  Shape shape;
  /// The value computed element by element last: the result, or what the
  /// reduce or the normalization reads.
  int64_t result = 0;
  bool reduces() const {
    return !values.empty() && values.back().source == Source::Reduce;
  }
  bool normalizes() const {
    return !values.empty() && values.back().source == Source::Norm;
  }
};
/// The type registers hold a value of `type` in.
inline DType computeDType(DType type) {
  return type == DType::BF16 || type == DType::F16 ? DType::F32 : type;
}
FusedPlan planFused(const std::vector<catalogue::FusedStep> &steps,
                    const std::vector<Tensor> &inputs, const Tensor &out);
/// One element of `out`'s type holding `value` (in the low bytes); a value
/// an integer type cannot hold is a KernelError.
uint64_t fillWord(const Tensor &out, double value);

void checkBinary(BinaryKind kind, const Tensor &lhs, const Tensor &rhs,
                 const Tensor &out);
void checkUnary(UnaryKind kind, const Tensor &input, const Tensor &out);
void checkCompare(const Tensor &lhs, const Tensor &rhs, const Tensor &out);
void checkSelect(const Tensor &pred, const Tensor &onTrue,
                 const Tensor &onFalse, const Tensor &out);
void checkConvert(const Tensor &input, const Tensor &out);

/// A dot as batched GEMMs: lhs permuted by lhsPerm is [batch, m, k], rhs
/// permuted by rhsPerm is [batch, k, n], the result is [batch, m, n]. An
/// operand whose permutation only swaps its matrix dims (lhs stored as
/// [batch, k, m], rhs as [batch, n, k]) is `transposed`: a GEMM reads it
/// in place with its transpose flag; every other non-identity permutation
/// is packed into a copy first (`packedBytes`, each operand's start
/// aligned to 256 bytes).
struct DotPlan {
  std::vector<int64_t> lhsPerm, rhsPerm;
  int64_t batch = 1, m = 1, k = 1, n = 1;
  bool lhsTransposed = false, rhsTransposed = false;
  bool packsLhs() const;
  bool packsRhs() const;
  /// Bytes of the packed copies, lhs first (256-byte aligned), then rhs.
  size_t packedLhsBytes(const Tensor &lhs) const;
  size_t packedBytes(const Tensor &lhs, const Tensor &rhs) const;
};
/// Whether `perm` keeps its first `lead` dims in place and swaps the two
/// runs of dims after them, each kept in order, the second of `second`
/// dims: [0 .. lead-1, lead+second .. r-1, lead .. lead+second-1].
bool swapsTrailingRuns(const std::vector<int64_t> &perm, size_t lead,
                       size_t second);
DotPlan planDot(const Tensor &lhs, const Tensor &rhs,
                const std::vector<int64_t> &lhsBatch,
                const std::vector<int64_t> &rhsBatch,
                const std::vector<int64_t> &lhsContract,
                const std::vector<int64_t> &rhsContract, const Tensor &out);

/// Softmax over the middle dim of the input viewed as [outer, len, inner].
struct RowPlan {
  int64_t outer = 1, len = 1, inner = 1;
};
RowPlan planSoftmax(const std::string &op, const Tensor &input, int64_t dim,
                    const Tensor &out);
void checkLayerNorm(const Tensor &input, const Tensor &gamma,
                    const Tensor &beta, const Tensor &out);
void checkRmsNorm(const Tensor &input, const Tensor &gamma, const Tensor &out);

/// A reduction: input dim d moves to output offset toOut[d] per step (0 for
/// reduced dims); `count` elements land in each output slot.
struct ReducePlan {
  std::vector<int64_t> toOut;
  int64_t count = 1;
};
ReducePlan planReduce(ReduceKind kind, const Tensor &input,
                      const std::vector<int64_t> &dims, const Tensor &out);

/// An optimizer's runtime scalars, read from lr and step (which must be in
/// host memory here): the learning rate and, for AdamW, the 1-based step.
struct OptimizerScalars {
  double lr = 0, step = 0;
};
OptimizerScalars checkAdamw(const Tensor &param, const Tensor &grad,
                            const Tensor &m, const Tensor &v, const Tensor &lr,
                            const Tensor &step, const Tensor &newParam,
                            const Tensor &newM, const Tensor &newV);
/// One f32 AdamW update of a batch, as both backends' batch kernels run it.
struct AdamwF32Update {
  const float *p, *g, *m, *v;
  float *p1, *m1, *v1;
  int64_t n;
  math::AdamwStep<float> s;
};
/// Checks an adamw instruction (operands `in`, results `out`, attributes
/// `a`; `lr` and `step` its learning rate and step readable on the host)
/// and describes it when its parameter, gradient, moments and results are
/// all f32; nullopt for the others, which run as single updates.
std::optional<AdamwF32Update>
planAdamwF32(const catalogue::Attrs &a, const std::vector<Tensor> &in,
             std::vector<Tensor> &out, const Tensor &lr, const Tensor &step);
/// momentumBuf and newMomentum are both null for plain SGD.
OptimizerScalars checkSgd(const Tensor &param, const Tensor &grad,
                          const Tensor *momentumBuf, const Tensor &lr,
                          const Tensor &newParam, const Tensor *newMomentum);

void checkConcat(const std::vector<Tensor> &inputs, int64_t dim,
                 const Tensor &out);
/// pad: every result element holds `fill` (one element of out's type),
/// then input element idx (row-major) goes to offset + sum idx[d] steps[d].
struct PadPlan {
  std::vector<char> fill;
  int64_t offset = 0;
  std::vector<int64_t> steps;
};
PadPlan planPad(const Tensor &input, const std::vector<int64_t> &low,
                const std::vector<int64_t> &high,
                const std::vector<int64_t> &interior, double fill,
                const Tensor &out);
/// scatter_add and gather: entry e of the indices [entries..., k] selects
/// the operand slice at start(e) = sum_j c_j indexSteps[j] (skipped when a
/// coordinate c_j is outside [0, indexLimits[j])); element i of a slice
/// (row-major over sliceShape) is at start(e) + sum idx[d] sliceSteps[d].
struct SlicePlan {
  std::vector<int64_t> sliceShape, sliceSteps, indexSteps, indexLimits;
  int64_t entries = 0, sliceSize = 0;
};
SlicePlan planScatterAdd(const Tensor &operand, const Tensor &indices,
                         const Tensor &updates,
                         const std::vector<int64_t> &dims, const Tensor &out);
SlicePlan planGather(const Tensor &operand, const Tensor &indices,
                     const std::vector<int64_t> &dims, const Tensor &out);
/// argmax/argmin over the middle dim of [outer, len, inner].
RowPlan planArgReduce(const Tensor &input, int64_t dim, bool max,
                      const Tensor &out);
void checkEmbedding(const Tensor &table, const Tensor &ids, const Tensor &out);
/// Reads the labels (host memory here): each must be in the vocabulary.
void checkCrossEntropy(const Tensor &logits, const Tensor &labels,
                       const Tensor &out);
void checkRope(const Tensor &input, float theta, const Tensor &out);
/// `stats` may be null (no statistics asked).
void checkAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                    const Tensor &out, const Tensor *stats);
void checkAttentionGradQ(const Tensor &q, const Tensor &k, const Tensor &v,
                         const Tensor &out, const Tensor &gradOut,
                         const Tensor &stats, const Tensor &gradQ);
void checkAttentionGradKv(const Tensor &q, const Tensor &k, const Tensor &v,
                          const Tensor &out, const Tensor &gradOut,
                          const Tensor &stats, const Tensor &gradK,
                          const Tensor &gradV);

/// Row-major strides of `shape`, in elements.
std::vector<int64_t> rowMajorStrides(const Shape &shape);

/// Reads a 0-d tensor of any type as a double.
double scalarValue(const Tensor &t);

} // namespace par::rt

#endif // PAR_RUNTIME_KERNELS_H
