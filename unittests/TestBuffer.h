//===- TestBuffer.h - Test tensors that own their storage -*- C++ -*-===//
#ifndef PAR_UNITTESTS_TESTBUFFER_H
#define PAR_UNITTESTS_TESTBUFFER_H

#include "par/Runtime/Kernels.h"

#include <cstdint>
#include <vector>

namespace par::testutil {

/// A tensor that owns its (8-byte aligned) storage, every byte `fill` to
/// begin with (0xff: NaN in every float type, so an element never written
/// shows).
struct Buffer {
  rt::DType dtype;
  rt::Shape shape;
  std::vector<uint64_t> words;

  Buffer(rt::DType dtype, rt::Shape shape, unsigned char fill = 0)
      : dtype(dtype), shape(std::move(shape)),
        words((rt::numElements(this->shape) * rt::dtypeBytes(dtype) + 7) / 8 +
                  1,
              uint64_t(fill) * 0x0101010101010101ull) {}

  rt::Tensor tensor() { return rt::Tensor{dtype, shape, words.data()}; }
  void *data() { return words.data(); }
  const void *data() const { return words.data(); }
  /// The elements' bytes (not the padding after them).
  std::vector<unsigned char> bytes() const {
    const auto *b = reinterpret_cast<const unsigned char *>(words.data());
    return {b, b + size() * rt::dtypeBytes(dtype)};
  }
  int64_t size() const { return rt::numElements(shape); }
  double get(int64_t i) const {
    return rt::loadElement(dtype, words.data(), i);
  }
  void set(int64_t i, double value) {
    rt::storeElement(dtype, words.data(), i, value);
  }
  template <typename T> T *as() { return reinterpret_cast<T *>(words.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(words.data());
  }
  std::vector<double> values() const {
    std::vector<double> v(size());
    for (int64_t i = 0; i < size(); ++i)
      v[i] = get(i);
    return v;
  }
};

} // namespace par::testutil

#endif // PAR_UNITTESTS_TESTBUFFER_H
