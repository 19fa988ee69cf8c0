//===- FusedJit.cpp - Fused groups compiled at load time ------------------===//
//
// The generated source of an element-wise fused group, and NVRTC opened
// at run time. CudaKernels.cu loads the CUBIN and launches it.
//
//===----------------------------------------------------------------------===//

#include "FusedJit.h"

#include <dlfcn.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

namespace par::rt::cuda {
namespace {

// ElementMath.h as NVRTC reads it (the build embeds the file's text).
const char *const kElementMathSource =
#include "ElementMathSource.inc"
    ;

/// The C++ type a value computes in, as the interpreted kernel keeps it
/// (f32 for f32/bf16/f16 storage).
const char *computeType(DType type) {
  switch (type) {
  case DType::F64:
    return "double";
  case DType::I64:
    return "int64_t";
  case DType::I32:
    return "int32_t";
  case DType::I1:
    return "uint8_t";
  default:
    return "float";
  }
}

/// The enumerator of `type` in source ("DType::BF16"): its program-file
/// name in capitals.
std::string dtypeEnum(DType type) {
  std::string name = dtypeName(type);
  for (char &c : name)
    c = char(std::toupper(static_cast<unsigned char>(c)));
  return "DType::" + name;
}

/// A splat's value (its compute type's bytes) as an exact literal.
std::string splatLiteral(const FusedCode::Value &v) {
  char text[64];
  switch (v.compute) {
  case DType::F64:
    std::snprintf(text, sizeof(text),
                  "__longlong_as_double(0x%016" PRIx64 "ll)", v.splat);
    break;
  case DType::I64:
    std::snprintf(text, sizeof(text), "int64_t(0x%016" PRIx64 "ull)", v.splat);
    break;
  case DType::I32: {
    uint32_t word;
    std::memcpy(&word, &v.splat, sizeof(word));
    std::snprintf(text, sizeof(text), "int32_t(0x%08" PRIx32 "u)", word);
    break;
  }
  case DType::I1: {
    uint8_t byte;
    std::memcpy(&byte, &v.splat, sizeof(byte));
    std::snprintf(text, sizeof(text), "uint8_t(%u)", unsigned(byte));
    break;
  }
  default: {
    uint32_t word;
    std::memcpy(&word, &v.splat, sizeof(word));
    std::snprintf(text, sizeof(text), "__uint_as_float(0x%08" PRIx32 "u)",
                  word);
    break;
  }
  }
  return text;
}

/// Whether n elements and every gather's offsets index in 32 bits, with
/// room for the grid-stride step past the last element.
bool narrowIndex(const FusedCode &code, int64_t n) {
  const int64_t limit = INT32_MAX;
  if (n + int64_t(kMaxBlocks) * kThreads > limit)
    return false;
  for (int k = 0; k < code.numValues; ++k) {
    const FusedCode::Value &v = code.values[k];
    if (v.how != FusedCode::Gather)
      continue;
    const Strides &s = code.gathers[v.gather];
    int64_t reach = 0;
    for (int d = 0; d < s.rank; ++d)
      reach += (s.size[d] - 1) * (s.step[d] < 0 ? -s.step[d] : s.step[d]);
    if (reach > limit)
      return false;
  }
  return true;
}

/// offsetOf's walk over a gather with its sizes and steps fixed, minor dim
/// first, as a kernel writes it: fn(size, step, moves) for each dim that is
/// not of size 1, where the offset gains (t % size) * step when step is
/// not 0, and the index moves on (t /= size) when `moves`.
template <typename Fn> void walkOf(const Strides &g, Fn fn) {
  for (int d = g.rank - 1; d >= 0; --d)
    if (g.size[d] != 1)
      fn(g.size[d], g.step[d], d > 0);
}

} // namespace

std::string fusedJitKey(const FusedCode &code, DType outType, int64_t n) {
  std::string key;
  auto put = [&](const auto &field) {
    key.append(reinterpret_cast<const char *>(&field), sizeof(field));
  };
  put(outType);
  put(narrowIndex(code, n));
  put(code.numValues);
  for (int k = 0; k < code.numValues; ++k) {
    const FusedCode::Value &v = code.values[k];
    put(v.how);
    if (v.how == FusedCode::Unused)
      continue; // no code
    put(v.kind);
    // f16 and bf16 compute in f32, as f32 does.
    put(v.compute == DType::F16 || v.compute == DType::BF16 ? DType::F32
                                                            : v.compute);
    put(v.storage);
    put(v.args);
    put(v.slot);
    put(v.gather);
    put(v.splat);
    if (v.how != FusedCode::Gather)
      continue;
    // What the source writes of the walk: a size only where it is used.
    walkOf(code.gathers[v.gather], [&](int64_t size, int64_t step, bool moves) {
      put(step);
      put(moves);
      if (step != 0 || moves)
        put(size);
    });
    put('.');
  }
  return key;
}

std::string fusedJitSource(const FusedCode &code, DType outType, int64_t n) {
  if (code.numValues < 1 || code.numValues > kMaxFusedValues)
    return {};
  std::ostringstream s;
  s << "#include \"par/Runtime/ElementMath.h\"\n"
       "using namespace par::rt;\n"
    // ElementMath.h's enums for NVRTC, against this build's.
    << "static_assert(int(DType::F32) == " << int(DType::F32)
    << " && int(DType::F16) == " << int(DType::F16)
    << " && int(DType::BF16) == " << int(DType::BF16)
    << " && int(DType::F64) == " << int(DType::F64)
    << " && int(DType::I64) == " << int(DType::I64)
    << " && int(DType::I32) == " << int(DType::I32)
    << " && int(DType::I1) == " << int(DType::I1) << ", \"DType\");\n"
    << "static_assert(int(CompareKind::Eq) == " << int(CompareKind::Eq)
    << " && int(CompareKind::Ne) == " << int(CompareKind::Ne)
    << " && int(CompareKind::Lt) == " << int(CompareKind::Lt)
    << " && int(CompareKind::Le) == " << int(CompareKind::Le)
    << " && int(CompareKind::Gt) == " << int(CompareKind::Gt)
    << " && int(CompareKind::Ge) == " << int(CompareKind::Ge)
    << ", \"CompareKind\");\n"
    << "typedef " << (narrowIndex(code, n) ? "int32_t" : "int64_t") << " I;\n"
    << "struct Args {\n  const void *inputs[" << kMaxFusedValues
    << "];\n  void *out;\n  int64_t n;\n};\n"
    << "extern \"C\" __global__ void __launch_bounds__(" << kThreads << ") "
    << kFusedJitKernel << "(const Args a) {\n"
    << "  const I n = I(a.n);\n"
       "  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n;\n"
       "       i += I(gridDim.x) * I(blockDim.x)) {\n";
  auto name = [](int k) { return "v" + std::to_string(k); };
  for (int k = 0; k < code.numValues; ++k) {
    const FusedCode::Value &v = code.values[k];
    const std::string type = computeType(v.compute), x = name(k);
    // Value k loaded from its input at `index`.
    auto load = [&](const std::string &index) {
      s << "    const " << type << " " << x << " = math::loadAs<" << type
        << ">(" << dtypeEnum(v.storage) << ", a.inputs[" << int(v.slot) << "], "
        << index << ");\n";
    };
    switch (v.how) {
    case FusedCode::Unused:
      continue;
    case FusedCode::Input:
      load("i");
      continue;
    case FusedCode::Gather: {
      const std::string o = "o" + std::to_string(k);
      s << "    I " << o << " = 0;\n    {\n      I t = i;\n";
      walkOf(code.gathers[v.gather],
             [&](int64_t size, int64_t step, bool moves) {
               if (step != 0)
                 s << "      " << o << " += (t % I(" << size << ")) * I("
                   << step << ");\n";
               if (moves)
                 s << "      t /= I(" << size << ");\n";
             });
      s << "    }\n";
      load(o);
      continue;
    }
    case FusedCode::Splat:
      s << "    const " << type << " " << x << " = " << splatLiteral(v)
        << ";\n";
      continue;
    case FusedCode::Binary:
    case FusedCode::Unary: {
      if (v.compute == DType::I1)
        return {}; // no arithmetic on i1 (the checks reject it)
      s << "    " << type << " " << x << " = math::";
      if (v.how == FusedCode::Binary)
        s << "applyBinary<" << type << ">(BinaryKind(" << int(v.kind) << "), "
          << name(v.args[0]) << ", " << name(v.args[1]) << ");\n";
      else
        s << "applyUnary<" << type << ">(UnaryKind(" << int(v.kind) << "), "
          << name(v.args[0]) << ");\n";
      // Rounded to its storage, as storing it would round it.
      if (type == "float" && v.storage == DType::BF16)
        s << "    " << x << " = math::bf16ToFloat(math::floatToBf16(" << x
          << "));\n";
      else if (type == "float" && v.storage == DType::F16)
        s << "    " << x << " = math::f16ToFloat(math::floatToF16(" << x
          << "));\n";
      continue;
    }
    case FusedCode::Compare: {
      const char *operand = computeType(code.values[v.args[0]].compute);
      s << "    const uint8_t " << x << " = math::applyCompare<" << operand
        << ">(CompareKind(" << int(v.kind) << "), " << name(v.args[0]) << ", "
        << name(v.args[1]) << ") ? 1 : 0;\n";
      continue;
    }
    case FusedCode::Select:
      s << "    const " << type << " " << x << " = " << name(v.args[0]) << " ? "
        << name(v.args[1]) << " : " << name(v.args[2]) << ";\n";
      continue;
    case FusedCode::Convert:
      // As the unfused convert: i64 -> i32 wraps; the rest goes through
      // the result's storage type.
      if (code.values[v.args[0]].compute == DType::I64 &&
          v.storage == DType::I32) {
        s << "    const int32_t " << x << " = int32_t(uint32_t(uint64_t("
          << name(v.args[0]) << ")));\n";
        continue;
      }
      s << "    " << type << " " << x << ";\n    {\n      uint64_t w = 0;\n"
        << "      math::storeAs<double>(" << dtypeEnum(v.storage)
        << ", &w, 0, double(" << name(v.args[0]) << "));\n      " << x
        << " = math::loadAs<" << type << ">(" << dtypeEnum(v.storage)
        << ", &w, 0);\n    }\n";
      continue;
    }
    return {};
  }
  const FusedCode::Value &last = code.values[code.numValues - 1];
  s << "    math::storeAs<" << computeType(last.compute) << ">("
    << dtypeEnum(outType) << ", a.out, i, " << name(code.numValues - 1)
    << ");\n  }\n}\n";
  return s.str();
}

//===----------------------------------------------------------------------===//
// NVRTC
//===----------------------------------------------------------------------===//

// NVRTC's C API, declared here so that nothing but the library itself is
// needed (its results are an int enum, a program an opaque pointer).
struct Nvrtc::Api {
  using Program = void *;
  const char *(*errorString)(int);
  int (*create)(Program *, const char *, const char *, int, const char *const *,
                const char *const *);
  int (*compile)(Program, int, const char *const *);
  int (*logSize)(Program, size_t *);
  int (*log)(Program, char *);
  int (*cubinSize)(Program, size_t *);
  int (*cubin)(Program, char *);
  int (*destroy)(Program *);
};

Nvrtc &Nvrtc::get(int cudaMajor) {
  static Nvrtc nvrtc(cudaMajor);
  return nvrtc;
}

Nvrtc::Nvrtc(int cudaMajor) {
  // The runtime's own version first (its libdevice is the one the
  // interpreted kernels were built with), then the loader's paths, then
  // the toolkit's usual homes.
  std::vector<std::string> names;
  if (cudaMajor > 0)
    names.push_back("libnvrtc.so." + std::to_string(cudaMajor));
  for (const char *name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"})
    names.push_back(name);
  for (const char *env : {"CUDA_PATH", "CUDA_HOME"})
    if (const char *root = std::getenv(env))
      names.push_back(std::string(root) + "/lib64/libnvrtc.so");
  names.push_back("/usr/local/cuda/lib64/libnvrtc.so");
  std::string last;
  for (const std::string &name : names) {
    if ((handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)))
      break;
    if (const char *reason = dlerror())
      last = reason;
  }
  if (!handle) {
    missing = "no libnvrtc.so on the library path (LD_LIBRARY_PATH) or in "
              "CUDA_PATH/lib64, CUDA_HOME/lib64, /usr/local/cuda/lib64 (" +
              last + ")";
    return;
  }
  static Api table;
  bool complete = true;
  auto bind = [&](auto &fn, const char *symbol) {
    void *address = dlsym(handle, symbol);
    complete = complete && address;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(address);
  };
  bind(table.errorString, "nvrtcGetErrorString");
  bind(table.create, "nvrtcCreateProgram");
  bind(table.compile, "nvrtcCompileProgram");
  bind(table.logSize, "nvrtcGetProgramLogSize");
  bind(table.log, "nvrtcGetProgramLog");
  bind(table.cubinSize, "nvrtcGetCUBINSize");
  bind(table.cubin, "nvrtcGetCUBIN");
  bind(table.destroy, "nvrtcDestroyProgram");
  if (!complete) {
    missing = "libnvrtc.so lacks a function par calls (CUBIN output needs "
              "CUDA 11.1 or later)";
    dlclose(handle);
    handle = nullptr;
    return;
  }
  api = &table;
}

std::vector<char> Nvrtc::compile(const std::string &source, int arch,
                                 std::string &error) const {
  if (!api) {
    error = missing;
    return {};
  }
  Api::Program program = nullptr;
  const char *headers[] = {kElementMathSource};
  const char *headerNames[] = {"par/Runtime/ElementMath.h"};
  int status = api->create(&program, source.c_str(), "par_fused.cu", 1, headers,
                           headerNames);
  if (status != 0) {
    error = std::string("nvrtcCreateProgram: ") + api->errorString(status);
    return {};
  }
  const std::string archOption =
      "--gpu-architecture=sm_" + std::to_string(arch);
  // nvcc's defaults, as CudaKernels.cu is compiled (multiply-adds within a
  // function contracted as there; steps round through ElementMath.h's
  // rounded add/sub/mul).
  const char *options[] = {archOption.c_str(), "-std=c++17"};
  status = api->compile(program, 2, options);
  std::vector<char> cubin;
  if (status != 0) {
    size_t size = 0;
    api->logSize(program, &size);
    std::string log(size, '\0');
    if (size)
      api->log(program, log.data());
    error = std::string("nvrtcCompileProgram: ") + api->errorString(status) +
            "\n" + log.c_str();
  } else {
    size_t size = 0;
    api->cubinSize(program, &size);
    cubin.resize(size);
    if (size)
      api->cubin(program, cubin.data());
    if (cubin.empty())
      error = "NVRTC gave no CUBIN for sm_" + std::to_string(arch);
  }
  api->destroy(&program);
  return cubin;
}

//===----------------------------------------------------------------------===//
// Generated kernels on the host
//===----------------------------------------------------------------------===//

namespace {
const char *const kHostShim = R"(#pragma once
#include <cstring>
#define __global__
#define __launch_bounds__(threads)
struct ParDim {
  unsigned x = 0;
};
inline const ParDim blockIdx{0}, threadIdx{0}, blockDim{1}, gridDim{1};
inline float __uint_as_float(unsigned word) {
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}
inline double __longlong_as_double(long long word) {
  double value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}
)";

std::string quoted(const std::string &text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
} // namespace

void *buildFusedJitForHost(const std::vector<std::string> &sources,
                           const std::string &cxx, const std::string &include,
                           std::string &error) {
  // A fresh directory in the system's temporary one (TMPDIR); mkdtemp
  // replaces the template's trailing Xs with a unique name.
  std::error_code failed;
  const std::filesystem::path base =
      std::filesystem::temp_directory_path(failed);
  std::string dir = (base / "par-fused-jit-XXXXXX").string();
  if (failed || !mkdtemp(dir.data())) {
    error = "cannot make a directory in " + base.string() + ": " +
            (failed ? failed.message() : std::strerror(errno));
    return nullptr;
  }
  std::string files;
  bool written = static_cast<bool>(std::ofstream(dir + "/shim.h") << kHostShim);
  for (size_t k = 0; k < sources.size(); ++k) {
    const std::string file = dir + "/k" + std::to_string(k) + ".cpp";
    written &=
        static_cast<bool>(std::ofstream(file) << "#define " << kFusedJitKernel
                                              << " par_fused_" << k << "\n"
                                              << sources[k]);
    files += " " + quoted(file);
  }
  const std::string library = dir + "/kernels.so";
  const std::string command =
      quoted(cxx) + " -std=c++17 -O1 -fPIC -shared -w -include " +
      quoted(dir + "/shim.h") + " -I" + quoted(include) + files + " -o " +
      quoted(library) + " 2>" + quoted(dir + "/errors.txt");
  void *handle = nullptr;
  if (!written) {
    error = "cannot write the sources under " + dir;
  } else if (std::system(command.c_str()) != 0) {
    std::stringstream messages;
    messages << std::ifstream(dir + "/errors.txt").rdbuf();
    error = command + "\n" + messages.str();
  } else if (!(handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL))) {
    error = dlerror();
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return handle;
}

HostFusedKernel hostFusedKernel(void *library, size_t k) {
  return reinterpret_cast<HostFusedKernel>(
      dlsym(library, ("par_fused_" + std::to_string(k)).c_str()));
}

bool fusedJitEnabled() {
  const char *value = std::getenv("PAR_CUDA_JIT");
  return !value || std::strcmp(value, "0") != 0;
}

} // namespace par::rt::cuda
