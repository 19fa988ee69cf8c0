//===- FuzzDriver.cpp - Deterministic mutation testing of par's inputs ----===//
//
// par-fuzz-driver --target=program|mlir --corpus DIR --seeds N
//
// Seed s picks a corpus file and 1 to 3 mutations from a generator seeded
// with s alone, so a seed names its input everywhere: byte flips, numbers
// replaced by boundary values (0, -1, 2^31, 2^63-1, 2^64, 1e308, nan, ...),
// lines deleted, duplicated or swapped, tokens replaced by other tokens of
// the file, element types swapped, truncation; for program files also JSON
// fields deleted or duplicated and values replaced by values of another
// type. Each input runs in a forked child under a memory cap (RLIMIT_AS)
// and a time cap; a signal, an exhausted cap, a timeout or one of the exit
// codes of FuzzTargets.h is a failure that prints the seed and saves the
// input. Clean errors are expected and counted.
//
//===----------------------------------------------------------------------===//

#include "FuzzTargets.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace par::fuzz;
using json = nlohmann::json;

namespace {

const char *kUsage = R"(usage: par-fuzz-driver --target=program|mlir [options]

Mutates the files of a corpus deterministically and runs each mutated input
in a child process under a memory and time cap; a crash, an exhausted cap,
a timeout or a bug exit code is a failure (exit status 1).

options:
  --corpus DIR        the inputs to mutate (every regular file in DIR)
  --seeds N           mutated inputs to run (default 100)
  --first-seed S      the first seed (default 0)
  --jobs J            children at once (default 1)
  --timeout SECONDS   time cap per input (default 10)
  --memory-mb MB      address-space cap per input (default 2048)
  --out DIR           where failing inputs are saved (default .)
  --replay FILE...    run these files as they are instead of mutating
  --known FILE        failures whose report contains a line of FILE are
                      known bugs: listed as KNOWN, not failures ('#' starts
                      a comment)
  --verbose           show each child's standard error
)";

/// splitmix64: small, fast and the same everywhere.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ULL + 1) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? size_t(next() % n) : 0; }
  bool chance(unsigned percent) { return next() % 100 < percent; }
};

// Numbers at the edges: sign, int32/int64/uint64 limits, the largest
// 64-aligned int64, the device limit of a mesh, doubles that do not fit.
const std::vector<std::string> kBoundaryNumbers = {"0",
                                                   "-1",
                                                   "1",
                                                   "2",
                                                   "3",
                                                   "7",
                                                   "65536",
                                                   "1048576",
                                                   "1048577",
                                                   "2147483647",
                                                   "2147483648",
                                                   "-2147483649",
                                                   "4294967296",
                                                   "9007199254740993",
                                                   "4611686018427387904",
                                                   "9223372036854775744",
                                                   "9223372036854775807",
                                                   "-9223372036854775808",
                                                   "18446744073709551615",
                                                   "18446744073709551616",
                                                   "1e308",
                                                   "-1e308",
                                                   "1e-320",
                                                   "nan",
                                                   "inf",
                                                   "-inf",
                                                   "0.5",
                                                   "-0"};

const std::vector<std::string> kMlirTypes = {
    "f32", "f16",  "bf16",          "f64",           "i1",
    "i8",  "i32",  "i64",           "index",         "complex<f32>",
    "ui8", "none", "vector<4xf32>", "f8E4M3FN",      "tensor<f32>",
    "i0",  "f80",  "tensor<?xf32>", "tensor<0xf32>", "memref<4xf32>"};

const std::vector<std::string> kProgramTypes = {
    "f32", "f16",   "bf16",      "f64", "i1", "i8",       "i32",
    "i64", "index", "complex64", "",    "u8", "f8E4M3FN", "F32"};

struct Input {
  std::string text;
  std::string origin;      // corpus file name
  std::string description; // the mutations applied
};

//===----------------------------------------------------------------------===//
// Text mutations
//===----------------------------------------------------------------------===//

struct Span {
  size_t begin, end;
};

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

std::vector<Span> numberSpans(const std::string &text) {
  std::vector<Span> spans;
  for (size_t i = 0; i < text.size();) {
    bool start =
        std::isdigit(static_cast<unsigned char>(text[i])) &&
        (i == 0 || !std::isdigit(static_cast<unsigned char>(text[i - 1])));
    if (!start) {
      ++i;
      continue;
    }
    size_t b = i;
    if (b > 0 && text[b - 1] == '-')
      --b;
    size_t e = i;
    while (e < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[e])) ||
            text[e] == '.' || text[e] == 'e' || text[e] == 'E' ||
            ((text[e] == '-' || text[e] == '+') && e > 0 &&
             (text[e - 1] == 'e' || text[e - 1] == 'E'))))
      ++e;
    spans.push_back({b, e});
    i = e;
  }
  return spans;
}

std::vector<Span> tokenSpans(const std::string &text) {
  std::vector<Span> spans;
  for (size_t i = 0; i < text.size();) {
    if (!std::isalpha(static_cast<unsigned char>(text[i])) && text[i] != '_') {
      ++i;
      continue;
    }
    size_t e = i;
    while (e < text.size() && isIdentChar(text[e]))
      ++e;
    spans.push_back({i, e});
    i = e;
  }
  return spans;
}

std::vector<Span> lineSpans(const std::string &text) {
  std::vector<Span> lines;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    e = e == std::string::npos ? text.size() : e + 1;
    lines.push_back({b, e});
    b = e;
  }
  return lines;
}

std::string quoteShort(const std::string &text) {
  std::string out;
  for (char c : text.substr(0, 40))
    out += c == '\n' ? ' ' : c;
  return "'" + out + (text.size() > 40 ? "...'" : "'");
}

/// One mutation of `text`; returns what it did.
std::string mutateText(std::string &text, Rng &rng,
                       const std::vector<std::string> &types) {
  if (text.empty()) {
    text = kBoundaryNumbers[rng.below(kBoundaryNumbers.size())];
    return "empty input replaced";
  }
  switch (rng.below(types == kMlirTypes ? 10 : 9)) {
  case 0: {
    size_t at = rng.below(text.size());
    unsigned bit = unsigned(rng.below(8));
    text[at] = char(text[at] ^ (1u << bit));
    return "bit " + std::to_string(bit) + " flipped at byte " +
           std::to_string(at);
  }
  case 1:
  case 2: {
    std::vector<Span> numbers = numberSpans(text);
    if (numbers.empty())
      break;
    Span s = numbers[rng.below(numbers.size())];
    std::string by = kBoundaryNumbers[rng.below(kBoundaryNumbers.size())];
    std::string was = text.substr(s.begin, s.end - s.begin);
    text.replace(s.begin, s.end - s.begin, by);
    return "number " + was + " at byte " + std::to_string(s.begin) + " -> " +
           by;
  }
  case 3: {
    std::vector<Span> lines = lineSpans(text);
    Span l = lines[rng.below(lines.size())];
    std::string was = text.substr(l.begin, l.end - l.begin);
    text.erase(l.begin, l.end - l.begin);
    return "line deleted: " + quoteShort(was);
  }
  case 4: {
    std::vector<Span> lines = lineSpans(text);
    Span l = lines[rng.below(lines.size())];
    std::string line = text.substr(l.begin, l.end - l.begin);
    text.insert(l.end, line);
    return "line duplicated: " + quoteShort(line);
  }
  case 5: {
    std::vector<Span> lines = lineSpans(text);
    if (lines.size() < 2)
      break;
    size_t a = rng.below(lines.size()), b = rng.below(lines.size());
    if (a == b)
      break;
    if (a > b)
      std::swap(a, b);
    std::string la = text.substr(lines[a].begin, lines[a].end - lines[a].begin);
    std::string lb = text.substr(lines[b].begin, lines[b].end - lines[b].begin);
    text.replace(lines[b].begin, lb.size(), la);
    text.replace(lines[a].begin, la.size(), lb);
    return "lines " + std::to_string(a + 1) + " and " + std::to_string(b + 1) +
           " swapped";
  }
  case 6: {
    std::vector<Span> tokens = tokenSpans(text);
    if (tokens.size() < 2)
      break;
    Span s = tokens[rng.below(tokens.size())];
    Span by = tokens[rng.below(tokens.size())];
    std::string was = text.substr(s.begin, s.end - s.begin);
    std::string with = text.substr(by.begin, by.end - by.begin);
    text.replace(s.begin, s.end - s.begin, with);
    return "token " + was + " at byte " + std::to_string(s.begin) + " -> " +
           with;
  }
  case 7: {
    // An element type swapped for another (or for one par does not take).
    std::vector<std::pair<size_t, std::string>> found;
    for (const std::string &type : types) {
      if (type.empty())
        continue;
      for (size_t at = text.find(type); at != std::string::npos;
           at = text.find(type, at + 1)) {
        bool wordStart = at == 0 || !isIdentChar(text[at - 1]);
        bool wordEnd =
            at + type.size() >= text.size() ||
            !std::isalnum(static_cast<unsigned char>(text[at + type.size()]));
        if (wordStart && wordEnd)
          found.emplace_back(at, type);
      }
    }
    if (found.empty())
      break;
    auto [at, type] = found[rng.below(found.size())];
    std::string with = types[rng.below(types.size())];
    // Every occurrence half of the time: a consistent change of type.
    if (rng.chance(50)) {
      std::string out;
      size_t count = 0;
      for (size_t i = 0; i < text.size();) {
        bool match =
            text.compare(i, type.size(), type) == 0 &&
            (i == 0 || !isIdentChar(text[i - 1])) &&
            (i + type.size() >= text.size() ||
             !std::isalnum(static_cast<unsigned char>(text[i + type.size()])));
        if (match) {
          out += with;
          i += type.size();
          ++count;
        } else {
          out += text[i++];
        }
      }
      text = out;
      return "type " + type + " -> " + with + " everywhere (" +
             std::to_string(count) + ")";
    }
    text.replace(at, type.size(), with);
    return "type " + type + " at byte " + std::to_string(at) + " -> " + with;
  }
  case 8: {
    size_t at = rng.below(text.size());
    text.resize(at);
    return "truncated at byte " + std::to_string(at);
  }
  case 9: {
    // A new first argument of any element type: it needs no use to reach
    // the emitter and its memory plan.
    size_t at = text.find("func.func @");
    if (at == std::string::npos ||
        (at = text.find('(', at)) == std::string::npos)
      break;
    const char *shapes[] = {"", "4x", "2x3x", "0x", "1x"};
    std::string arg = "%fuzz: tensor<" + std::string(shapes[rng.below(5)]) +
                      types[rng.below(types.size())] + ">";
    text.insert(at + 1, arg + (text[at + 1] == ')' ? "" : ", "));
    return "argument " + arg + " added";
  }
  }
  // The chosen mutation did not apply: flip a byte instead.
  size_t at = rng.below(text.size());
  text[at] = char(text[at] ^ 0x20);
  return "byte " + std::to_string(at) + " case-flipped";
}

//===----------------------------------------------------------------------===//
// JSON mutations (program files)
//===----------------------------------------------------------------------===//

struct Node {
  json *value;
  std::string path;
};

void collect(json &value, const std::string &path, std::vector<Node> &out) {
  out.push_back({&value, path});
  if (value.is_object())
    for (auto it = value.begin(); it != value.end(); ++it)
      collect(it.value(), path + "." + it.key(), out);
  else if (value.is_array())
    for (size_t i = 0; i < value.size(); ++i)
      collect(value[i], path + "[" + std::to_string(i) + "]", out);
}

json boundaryValue(Rng &rng) {
  switch (rng.below(19)) {
  case 0:
    return 0;
  case 1:
    return -1;
  case 2:
    return int64_t(2147483648LL);
  case 3:
    return INT64_MAX;
  case 4:
    return INT64_MIN;
  case 5:
    return UINT64_MAX;
  case 6:
    return 1e308;
  case 7:
    return -0.5;
  case 8:
    return int64_t(1) << 40;
  case 9:
    return nullptr;
  case 10:
    return "";
  case 11:
    return json::array();
  case 12:
    return json::object();
  case 13:
    return true;
  case 14:
    return kProgramTypes[rng.below(kProgramTypes.size())];
  case 15:
    return INT64_MAX / 64 * 64; // the largest aligned offset
  case 16:
    return int64_t(1) << 62;
  case 17:
    return int64_t(1) << 20; // the most devices a mesh may have
  default:
    return int64_t(rng.below(5)) - 1;
  }
}

/// One structural mutation of a JSON document; "" when none applied.
std::string mutateJson(json &doc, Rng &rng) {
  std::vector<Node> nodes;
  collect(doc, "", nodes);
  Node node = nodes[rng.below(nodes.size())];
  json &v = *node.value;
  std::string where = node.path.empty() ? "(root)" : node.path;
  switch (rng.below(7)) {
  case 0:
    if (v.is_object() && !v.empty()) {
      auto it = std::next(v.begin(), long(rng.below(v.size())));
      std::string key = it.key();
      v.erase(key);
      return "field " + where + "." + key + " deleted";
    }
    break;
  case 1:
    if (v.is_array() && !v.empty()) {
      size_t i = rng.below(v.size());
      json copy = v[i];
      v.insert(v.begin() + long(i), copy);
      return "element " + where + "[" + std::to_string(i) + "] duplicated";
    }
    break;
  case 2:
    if (v.is_array() && !v.empty()) {
      size_t i = rng.below(v.size());
      v.erase(v.begin() + long(i));
      return "element " + where + "[" + std::to_string(i) + "] deleted";
    }
    break;
  case 3:
  case 4: {
    json by = boundaryValue(rng);
    std::string was = v.dump().substr(0, 40);
    v = by;
    return "value " + where + " (" + was + ") -> " + by.dump();
  }
  case 5:
    if (v.is_number_integer()) {
      int64_t was = v.get<int64_t>();
      // Off by one or an alignment, or scaled towards overflow.
      int64_t deltas[] = {1, -1, 2, 64, -64};
      int64_t by = 0;
      if (rng.chance(25) ||
          __builtin_mul_overflow(was, int64_t(1) << (16 + rng.below(32)), &by))
        if (__builtin_add_overflow(was, deltas[rng.below(5)], &by))
          by = was;
      v = by;
      return "integer " + where + " " + std::to_string(was) + " -> " +
             std::to_string(by);
    }
    break;
  case 6:
    if (v.is_string()) {
      std::string was = v.get<std::string>();
      // Another string of the document: a field name, an op, a dtype.
      std::vector<std::string> strings;
      for (const Node &n : nodes)
        if (n.value->is_string())
          strings.push_back(n.value->get<std::string>());
      std::string by = rng.chance(30)
                           ? kProgramTypes[rng.below(kProgramTypes.size())]
                           : strings[rng.below(strings.size())];
      v = by;
      return "string " + where + " '" + was.substr(0, 30) + "' -> '" + by + "'";
    }
    break;
  }
  return "";
}

Input mutate(const std::vector<std::pair<std::string, std::string>> &corpus,
             uint64_t seed, bool program) {
  Rng rng(seed);
  const auto &[name, original] = corpus[rng.below(corpus.size())];
  Input input{original, name, ""};
  size_t count = 1 + rng.below(3);
  const std::vector<std::string> &types = program ? kProgramTypes : kMlirTypes;
  for (size_t m = 0; m < count; ++m) {
    std::string what;
    if (program && rng.chance(70)) {
      json doc = json::parse(input.text, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_discarded()) {
        what = mutateJson(doc, rng);
        if (!what.empty())
          input.text = doc.dump(rng.chance(50) ? 1 : -1, ' ', false,
                                json::error_handler_t::replace);
      }
    }
    if (what.empty())
      what = mutateText(input.text, rng, types);
    input.description += (input.description.empty() ? "" : "; ") + what;
  }
  return input;
}

//===----------------------------------------------------------------------===//
// Running inputs in children
//===----------------------------------------------------------------------===//

struct Options {
  bool program = true;
  std::string corpus, out = ".";
  uint64_t seeds = 100, firstSeed = 0;
  unsigned jobs = 1;
  double timeout = 10;
  uint64_t memoryMb = 2048;
  std::vector<std::string> replay;
  bool verbose = false;
  /// Failures whose report contains one of these are known bugs: listed,
  /// not counted as failures.
  std::vector<std::string> known;
};

struct Child {
  pid_t pid;
  uint64_t seed;
  Input input;
  std::string log;
  std::chrono::steady_clock::time_point deadline;
};

struct Counts {
  uint64_t accepted = 0, rejected = 0, otherErrors = 0, failures = 0, known = 0;
  std::map<std::string, uint64_t> knownSeen;
};

/// "par-fuzz: WHAT in STAGE" on standard error, from a signal handler.
void sayWhere(const char *what) {
  const char *stage = currentStage;
  for (const char *part : {"par-fuzz: ", what, " in ", stage, "\n"}) {
    ssize_t ignored = write(2, part, std::strlen(part));
    (void)ignored;
  }
}

/// A crash's stack, then the default action: the parent sees the signal.
void onCrash(int sig) {
  sayWhere("crashed");
  const char message[] = "innermost frames first:\n";
  ssize_t ignored = write(2, message, sizeof message - 1);
  (void)ignored;
  void *frames[48];
  backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void catchCrashes() {
  void *warm[1];
  backtrace(warm, 1); // loads the unwinder now, not in the handler
  static std::vector<char> altStack(size_t(1) << 16);
  stack_t ss = {};
  ss.ss_sp = altStack.data();
  ss.ss_size = altStack.size();
  sigaltstack(&ss, nullptr);
  struct sigaction action = {};
  action.sa_handler = onCrash;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL})
    sigaction(sig, &action, nullptr);
}

[[noreturn]] void runChild(const Options &o, const Input &input,
                           const std::string &log) {
  struct rlimit cap;
  cap.rlim_cur = cap.rlim_max = rlim_t(o.memoryMb) << 20;
  setrlimit(RLIMIT_AS, &cap);
  struct rlimit noCore = {0, 0};
  setrlimit(RLIMIT_CORE, &noCore);
  std::set_new_handler([] {
    sayWhere("out of memory under the cap");
    // Who asked: the frames name the allocating function.
    void *frames[32];
    backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
    _exit(kExitOutOfMemory);
  });
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  catchCrashes();
  alarm(unsigned(std::max(1.0, o.timeout)));
  // Test hook of the harness itself (test/fuzz/harness.test): the child
  // crashes, hangs or allocates without bound instead of running a target.
  if (const char *test = std::getenv("PAR_FUZZ_DRIVER_SELFTEST")) {
    std::string what = test;
    if (what == "segv")
      std::raise(SIGSEGV);
    if (what == "hang")
      for (;;)
        pause();
    if (what == "oom")
      for (std::vector<std::vector<char>> hog;;)
        hog.emplace_back(size_t(64) << 20, 'x');
  }
  const uint8_t *data = reinterpret_cast<const uint8_t *>(input.text.data());
  Outcome outcome;
  try {
    outcome = o.program ? runProgramInput(data, input.text.size())
                        : runMlirInput(data, input.text.size());
  } catch (const std::bad_alloc &) {
    _exit(kExitOutOfMemory);
  }
  std::fflush(nullptr);
  _exit(int(outcome));
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string failureOf(int status, bool killedForTime) {
  if (killedForTime)
    return "timed out (killed)";
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      return "timed out";
    return std::string("crashed with signal ") + std::to_string(sig) + " (" +
           strsignal(sig) + ")";
  }
  int code = WEXITSTATUS(status);
  switch (code) {
  case kExitOutOfMemory:
    return "hit the memory cap";
  case kExitFatalError:
    return "hit a fatal error";
  case kExitRoundTrip:
    return "emitted a program par-run rejects";
  case kExitUnsafeProgram:
    return "loaded a program whose plan leaves its arena";
  default:
    return "exited with status " + std::to_string(code);
  }
}

void finish(const Options &o, Child &child, int status, bool killedForTime,
            Counts &counts) {
  if (!killedForTime && WIFEXITED(status) &&
      WEXITSTATUS(status) <= int(Outcome::OtherError)) {
    switch (Outcome(WEXITSTATUS(status))) {
    case Outcome::Accepted:
      ++counts.accepted;
      break;
    case Outcome::Rejected:
      ++counts.rejected;
      break;
    case Outcome::OtherError:
      ++counts.otherErrors;
      break;
    }
    if (o.verbose)
      std::fputs(readFile(child.log).c_str(), stderr);
    std::remove(child.log.c_str());
    return;
  }
  std::string ext = o.program ? ".json" : ".mlir";
  std::string what = failureOf(status, killedForTime);
  // The first lines say what failed (a crash's innermost frames).
  std::string log = readFile(child.log);
  if (log.size() > 2500)
    log = log.substr(0, 2500) + "...\n";
  for (const std::string &signature : o.known) {
    if ((what + "\n" + log).find(signature) == std::string::npos)
      continue;
    ++counts.known;
    ++counts.knownSeen[signature];
    std::printf("par-fuzz-driver: KNOWN %s%s: %s [%s]\n",
                child.seed == UINT64_MAX
                    ? ""
                    : ("seed " + std::to_string(child.seed) + " ").c_str(),
                child.input.origin.c_str(), what.c_str(), signature.c_str());
    std::remove(child.log.c_str());
    return;
  }
  ++counts.failures;
  std::string name = child.seed == UINT64_MAX
                         ? child.input.origin
                         : (o.program ? "program" : "mlir") +
                               std::string("-seed-") +
                               std::to_string(child.seed) + ext;
  std::string saved = o.out + "/" + name;
  if (child.seed != UINT64_MAX) {
    std::ofstream file(saved, std::ios::binary);
    file << child.input.text;
  }
  std::printf("par-fuzz-driver: FAIL %s%s: %s\n",
              child.seed == UINT64_MAX
                  ? ""
                  : ("seed " + std::to_string(child.seed) + " ").c_str(),
              (child.seed == UINT64_MAX ? child.input.origin
                                        : "(" + child.input.origin + ": " +
                                              child.input.description + ")")
                  .c_str(),
              what.c_str());
  if (!log.empty())
    std::printf("  output: %s", log.c_str());
  if (child.seed != UINT64_MAX)
    std::printf("  input saved to %s\n", saved.c_str());
  std::fflush(stdout);
  std::remove(child.log.c_str());
}

/// Runs every input `next` yields, `jobs` children at a time.
Counts runAll(const Options &o,
              const std::function<bool(uint64_t &, Input &)> &next) {
  Counts counts;
  std::vector<Child> running;
  const char *tmp = std::getenv("TMPDIR");
  std::string logDir = tmp && *tmp ? tmp : "/tmp";
  bool more = true;
  unsigned slot = 0;
  while (more || !running.empty()) {
    while (more && running.size() < o.jobs) {
      Child child;
      if (!(more = next(child.seed, child.input)))
        break;
      child.log = logDir + "/par-fuzz-driver-" + std::to_string(getpid()) +
                  "-" + std::to_string(slot++) + ".log";
      std::fflush(nullptr);
      child.pid = fork();
      if (child.pid < 0) {
        std::perror("par-fuzz-driver: fork");
        std::exit(2);
      }
      if (child.pid == 0)
        runChild(o, child.input, child.log);
      child.deadline = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::duration<double>(o.timeout + 5));
      running.push_back(std::move(child));
    }
    bool reaped = false;
    for (size_t i = 0; i < running.size();) {
      int status = 0;
      pid_t done = waitpid(running[i].pid, &status, WNOHANG);
      bool late =
          !done && std::chrono::steady_clock::now() > running[i].deadline;
      if (late) {
        kill(running[i].pid, SIGKILL);
        waitpid(running[i].pid, &status, 0);
      }
      if (done == running[i].pid || late) {
        finish(o, running[i], status, late, counts);
        running.erase(running.begin() + long(i));
        reaped = true;
        continue;
      }
      ++i;
    }
    if (!reaped && !running.empty())
      std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  return counts;
}

[[noreturn]] void usage(const std::string &message) {
  std::fprintf(stderr, "par-fuzz-driver: error: %s\n%s", message.c_str(),
               kUsage);
  std::exit(2);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  bool haveTarget = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    size_t eq = arg.find('=');
    std::string flag = eq == std::string::npos ? arg : arg.substr(0, eq);
    auto next = [&]() -> std::string {
      if (eq != std::string::npos)
        return arg.substr(eq + 1);
      if (i + 1 >= argc)
        usage(flag + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string &text) {
      char *end = nullptr;
      unsigned long long v = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end)
        usage(flag + " expects a non-negative integer, got '" + text + "'");
      return uint64_t(v);
    };
    if (flag == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--target") {
      std::string t = next();
      if (t != "program" && t != "mlir")
        usage("--target must be program or mlir");
      o.program = t == "program";
      haveTarget = true;
    } else if (flag == "--corpus") {
      o.corpus = next();
    } else if (flag == "--seeds") {
      o.seeds = number(next());
    } else if (flag == "--first-seed") {
      o.firstSeed = number(next());
    } else if (flag == "--jobs") {
      o.jobs = unsigned(std::max<uint64_t>(1, number(next())));
    } else if (flag == "--timeout") {
      o.timeout = double(std::max<uint64_t>(1, number(next())));
    } else if (flag == "--memory-mb") {
      o.memoryMb = number(next());
    } else if (flag == "--out") {
      o.out = next();
    } else if (flag == "--known") {
      std::ifstream in(next());
      if (!in)
        usage("cannot read the --known file");
      for (std::string line; std::getline(in, line);) {
        line = line.substr(0, line.find('#'));
        while (!line.empty() &&
               std::isspace(static_cast<unsigned char>(line.back())))
          line.pop_back();
        if (!line.empty())
          o.known.push_back(line);
      }
    } else if (flag == "--verbose") {
      o.verbose = true;
    } else if (flag == "--replay") {
      while (i + 1 < argc && argv[i + 1][0] != '-')
        o.replay.push_back(argv[++i]);
    } else {
      usage("unknown argument '" + arg + "'");
    }
  }
  if (!haveTarget)
    usage("--target=program|mlir is required");
  if (o.corpus.empty() && o.replay.empty())
    usage("--corpus DIR or --replay FILE... is required");
  return o;
}

std::vector<std::pair<std::string, std::string>>
readCorpus(const std::string &dir) {
  std::vector<std::pair<std::string, std::string>> files;
  DIR *d = opendir(dir.c_str());
  if (!d) {
    std::fprintf(stderr, "par-fuzz-driver: error: cannot read %s: %s\n",
                 dir.c_str(), std::strerror(errno));
    std::exit(2);
  }
  while (dirent *e = readdir(d)) {
    std::string path = dir + "/" + e->d_name;
    struct stat st;
    if (e->d_name[0] == '.' || stat(path.c_str(), &st) || !S_ISREG(st.st_mode))
      continue;
    files.emplace_back(e->d_name, readFile(path));
  }
  closedir(d);
  // Seeds name inputs: the order must not depend on the directory.
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseOptions(argc, argv);
  if (!o.program)
    initMlirTarget(); // once, before the children fork
  const char *target = o.program ? "program" : "mlir";
  auto start = std::chrono::steady_clock::now();

  Counts counts;
  uint64_t total = 0;
  if (!o.replay.empty()) {
    size_t i = 0;
    counts = runAll(o, [&](uint64_t &seed, Input &input) {
      if (i >= o.replay.size())
        return false;
      seed = UINT64_MAX;
      input = Input{readFile(o.replay[i]), o.replay[i], "as is"};
      ++i;
      return true;
    });
    total = o.replay.size();
  } else {
    auto corpus = readCorpus(o.corpus);
    if (corpus.empty()) {
      std::fprintf(stderr, "par-fuzz-driver: error: %s holds no files\n",
                   o.corpus.c_str());
      return 2;
    }
    // The corpus itself first: it must hold inputs that are accepted, or
    // the mutations test nothing past the first error.
    size_t i = 0;
    Counts original = runAll(o, [&](uint64_t &seed, Input &input) {
      if (i >= corpus.size())
        return false;
      seed = UINT64_MAX;
      input =
          Input{corpus[i].second, o.corpus + "/" + corpus[i].first, "as is"};
      ++i;
      return true;
    });
    std::printf("par-fuzz-driver: %s corpus: %zu file(s), %llu accepted\n",
                target, corpus.size(), (unsigned long long)original.accepted);
    uint64_t seed = o.firstSeed;
    counts = runAll(o, [&](uint64_t &s, Input &input) {
      if (seed >= o.firstSeed + o.seeds)
        return false;
      s = seed;
      input = mutate(corpus, seed, o.program);
      ++seed;
      return true;
    });
    counts.failures += original.failures;
    counts.known += original.known;
    for (const auto &[signature, n] : original.knownSeen)
      counts.knownSeen[signature] += n;
    total = o.seeds;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf(
      "par-fuzz-driver: %s: %llu input(s) in %.1f s: %llu accepted, "
      "%llu rejected with an error, %llu with another exception, "
      "%llu known, %llu failure(s)\n",
      target, (unsigned long long)total, seconds,
      (unsigned long long)counts.accepted, (unsigned long long)counts.rejected,
      (unsigned long long)counts.otherErrors, (unsigned long long)counts.known,
      (unsigned long long)counts.failures);
  for (const std::string &signature : o.known)
    if (!counts.knownSeen.count(signature))
      std::printf("par-fuzz-driver: known failure '%s' not seen\n",
                  signature.c_str());
  return counts.failures ? 1 : 0;
}
