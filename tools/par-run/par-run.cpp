//===- par-run.cpp - Runs a par program on N ranks ------------------------===//
//
// `par-run PROGRAM -np N` validates the program, then starts N ranks through
// mpirun; started by mpirun/srun itself it takes rank and size from MPI. Each
// rank runs its instruction stream for --steps steps, rank 0 logs loss,
// tokens/s and memory, and checkpoints, traces and output dumps are written
// on request. Every failure ends with a message naming the rank, step and
// what failed, and a non-zero exit.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Bubble.h"
#include "par/Runtime/Calibrate.h"
#include "par/Runtime/Checkpoint.h"
#include "par/Runtime/CheckpointSave.h"
#include "par/Runtime/Comm/DeviceCollectives.h"
#include "par/Runtime/Comm/MpiCollectives.h"
#include "par/Runtime/Executor.h"
#include "par/Runtime/FileIO.h"
#include "par/Runtime/Parallel.h"
#include "par/Runtime/Program.h"
#include "par/Runtime/Trace.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sched.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace par::rt;

namespace {

const char *kUsage = R"(usage: par-run PROGRAM [options]
       par-run --calibrate [-np N] -o PROFILE.json

Runs a program written by `par-opt --emit-program=PROGRAM` on one rank per
device of its mesh (CPU backend: OpenBLAS kernels, MPI collectives; CUDA
backend: cuBLASLt and CUDA kernels, NCCL collectives per group). A
pipelined program ends with each stage's measured peak against its plan
and the bubble: predicted, replayed from the measured instruction times,
and wall-clock idle over busy per stage.
With --calibrate, measures this machine on N ranks (default 1) instead:
GEMM FLOP/s per float type, memory bandwidth, the cost of an op, and each
collective's latency and bandwidth; writes them as a hardware profile that
`par-opt --auto-shard="hardware=PROFILE.json"` and `--par-report` read.

options:
  -np N               ranks to start through mpirun (default: the program's
                      device count; must equal it)
  --backend=cpu|cuda  execution backend (default cpu); cuda needs a runtime
                      built with a CUDA toolkit and a visible GPU (an error
                      names what is missing). One GPU per rank.
  --staged-collectives
                      run every collective and transfer through host copies
                      over MPI, as a GPU runtime without NCCL does (on the
                      CPU backend: checks that path)
  --steps N           steps to run (default 10)
  --seed N            seed of parameter initialization and synthetic data
                      (default 0)
  --data=synthetic|FILE
                      data for token inputs: synthetic tokens, or the bytes
                      of any text file (default synthetic)
  --log-every N       print a step line every N steps (default 1; 0: none):
                      loss, each 0-d output named log.X (lr, grad_norm,
                      loss_scale, skipped), tokens/s, time, measured and
                      planned memory
  --save DIR          write a sharded checkpoint of the parameters and
                      optimizer states to DIR after the last step (atomic:
                      an interrupted save leaves the previous one whole)
  --save-every N      also save every N steps (needs --save)
  --keep K            published checkpoints to keep in DIR (default 1);
                      older ones are removed only after a newer one is
                      published
  --load DIR          start from the newest complete checkpoint in DIR, or
                      from one step directory DIR/step-N-ID (any mesh or
                      sharding; checksums verified); steps continue from
                      its step
  --on-nonfinite=stop|skip|warn
                      a non-finite loss, gradient norm or updated parameter:
                      stop with exit code 4 (default), undo the step and
                      go on, or warn and go on; a checkpoint is never saved
                      with non-finite parameters
  --max-skipped-steps N
                      steps in a row that may be skipped (by fp16 loss
                      scaling, or by --on-nonfinite=skip) before the run
                      stops as diverged (default 64)
  --trace FILE        write a Chrome trace (one track per rank for compute
                      and communication, and a pipeline's schedule slots:
                      F3, B3, W3), viewable in Perfetto; on the CUDA
                      backend each instruction is timed to the end of its
                      work (tracing serializes the streams)
  --timeout SECONDS   a collective, or a read of --data, that does not finish
                      within SECONDS stops the job with a report (default
                      300; 0: wait forever)
  --dump-outputs FILE write the global value of every output after the last
                      step as JSON (non-finite values as "nan", "inf",
                      "-inf"), with the planned and measured memory of
                      every rank and rank 0's traffic in that step
  --json              print rank 0's log as JSON lines instead of text: one
                      object per line with "event" start, step, save, warning,
                      stages and bubble (a pipelined program) or end;
                      numbers at full precision, non-finite ones as "nan",
                      "inf", "-inf" (step: loss, log, tokens_per_s,
                      seconds, peak_bytes, planned_bytes)
  --calibrate         measure this machine into a hardware profile (above)
  -o, --output FILE   where --calibrate writes the profile
  --min-time SECONDS  --calibrate: how long each measurement repeats
                      (default 0.2)
  --help              show this text
  --version           show the program format version this par-run reads

Under mpirun or srun, par-run takes its rank and size from MPI:
  mpirun -np 8 par-run model.parprog --steps 100
Each rank runs its CPU kernels on PAR_CPU_THREADS threads (default: its
share of the usable cores; -np N sets cores / N). With --backend=cuda,
element-wise fused groups are compiled (NVRTC) when first run;
PAR_CUDA_JIT=0 runs them in the interpreted kernel. bf16/f16 attention
runs on tensor cores; PAR_CUDA_ATTENTION=simt runs the f32 kernels.
See docs/par-run.md.
)";

struct Options {
  std::string program;
  int64_t np = -1;
  std::string backend = "cpu";
  bool stagedCollectives = false;
  int64_t steps = 10;
  uint64_t seed = 0;
  std::string data = "synthetic";
  int64_t logEvery = 1;
  std::string save, load, trace, dumpOutputs;
  int64_t saveEvery = 0;
  int64_t keep = 1;
  enum class NonFinite { Stop, Skip, Warn } onNonFinite = NonFinite::Stop;
  int64_t maxSkipped = 64;
  double timeout = 300;
  bool json = false;
  bool calibrate = false;
  std::string output;
  double minTime = 0.2;
};

/// Exit code of a run stopped by a non-finite value.
constexpr int kExitNonFinite = 4;

/// A number for the JSON log: full precision, non-finite values spelled as
/// programs spell them.
nlohmann::json jsonNumber(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value < 0 ? "-inf" : "inf";
  return value;
}

/// One line of the JSON log (rank 0 only).
void emitJson(const nlohmann::json &event) {
  std::printf("%s\n", event.dump().c_str());
  std::fflush(stdout);
}

/// Writes `line` and a newline to stderr with one system call, so that
/// lines of several ranks never interleave.
void writeErrorLine(const std::string &line) {
  std::string text = line + "\n";
  std::fflush(stdout);
  (void)!::write(2, text.data(), text.size());
}

/// One error line; "rank N: " is added unless the message already names
/// the rank.
void reportError(int rank, const std::string &message, bool nameRank = true) {
  writeErrorLine("par-run: error: " +
                 (nameRank && !namesRank(message, rank)
                      ? "rank " + std::to_string(rank) + ": "
                      : std::string()) +
                 message);
}

[[noreturn]] void usageError(const std::string &message) {
  std::cerr << "par-run: error: " << message << "\n"
            << "run 'par-run --help' for the options\n";
  std::exit(2);
}

int64_t parseInt(const std::string &flag, const std::string &text,
                 int64_t min) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || value < min)
    usageError(flag + " expects an integer >= " + std::to_string(min) +
               ", got '" + text + "'");
  return value;
}

/// Parses argv; `rest` receives the arguments to pass on to mpirun'd ranks
/// (everything but -np).
Options parseOptions(int argc, char **argv, std::vector<std::string> &rest) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string flag = arg, value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      flag = arg.substr(0, arg.find('='));
      value = arg.substr(arg.find('=') + 1);
      hasValue = true;
    }
    auto next = [&]() -> std::string {
      if (hasValue)
        return value;
      if (i + 1 >= argc)
        usageError(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (flag == "--version") {
      std::cout << "par-run (program format version " << kProgramVersion
                << ")\n";
      std::exit(0);
    }
    if (flag == "-np" || flag == "--np" || flag == "-n") {
      o.np = parseInt(flag, next(), 1);
      continue;
    }
    size_t before = rest.size();
    rest.push_back(arg);
    if (flag == "--json") {
      if (hasValue)
        usageError("--json takes no value");
      o.json = true;
      continue;
    }
    if (flag == "--staged-collectives") {
      if (hasValue)
        usageError("--staged-collectives takes no value");
      o.stagedCollectives = true;
      continue;
    }
    if (flag == "--calibrate") {
      if (hasValue)
        usageError("--calibrate takes no value");
      o.calibrate = true;
      continue;
    }
    if (flag == "-o" || flag == "--output")
      o.output = next();
    else if (flag == "--min-time") {
      std::string text = next();
      char *end = nullptr;
      o.minTime = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || !(o.minTime > 0) || o.minTime > 60)
        usageError("--min-time expects seconds in (0, 60], got '" + text +
                   "'");
    } else if (flag == "--backend")
      o.backend = next();
    else if (flag == "--steps")
      o.steps = parseInt(flag, next(), 0);
    else if (flag == "--seed")
      o.seed = uint64_t(parseInt(flag, next(), 0));
    else if (flag == "--data")
      o.data = next();
    else if (flag == "--log-every")
      o.logEvery = parseInt(flag, next(), 0);
    else if (flag == "--save")
      o.save = next();
    else if (flag == "--load")
      o.load = next();
    else if (flag == "--trace")
      o.trace = next();
    else if (flag == "--dump-outputs")
      o.dumpOutputs = next();
    else if (flag == "--timeout")
      o.timeout = double(parseInt(flag, next(), 0));
    else if (flag == "--save-every")
      o.saveEvery = parseInt(flag, next(), 1);
    else if (flag == "--keep")
      o.keep = parseInt(flag, next(), 1);
    else if (flag == "--max-skipped-steps")
      o.maxSkipped = parseInt(flag, next(), 0);
    else if (flag == "--on-nonfinite") {
      std::string mode = next();
      if (mode == "stop")
        o.onNonFinite = Options::NonFinite::Stop;
      else if (mode == "skip")
        o.onNonFinite = Options::NonFinite::Skip;
      else if (mode == "warn")
        o.onNonFinite = Options::NonFinite::Warn;
      else
        usageError("--on-nonfinite must be stop, skip or warn, got '" + mode +
                   "'");
    }
    else if (!arg.empty() && arg[0] == '-')
      usageError("unknown option '" + arg + "'");
    else if (o.program.empty())
      o.program = arg;
    else
      usageError("more than one program given ('" + o.program + "' and '" +
                 arg + "')");
    if (!hasValue && rest.size() == before + 1 && arg != o.program)
      rest.push_back(argv[i]);
  }
  if (o.calibrate) {
    if (!o.program.empty())
      usageError("--calibrate measures the machine and runs no program (got '" +
                 o.program + "')");
    if (o.output.empty())
      usageError("--calibrate needs -o FILE, where the profile is written");
  } else if (!o.output.empty()) {
    usageError("-o is --calibrate's output; a run writes with --save, "
               "--dump-outputs or --trace");
  } else if (o.program.empty()) {
    usageError("no program given");
  }
  if (o.backend != "cpu" && o.backend != "cuda")
    usageError("--backend must be cpu or cuda, got '" + o.backend + "'");
  if (o.saveEvery > 0 && o.save.empty())
    usageError("--save-every needs --save DIR");
  return o;
}

bool underLauncher() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                          "PMI_RANK", "SLURM_PROCID", "PAR_RUN_LAUNCHED"})
    if (std::getenv(var))
      return true;
  return false;
}

std::string findOnPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return "";
}

std::string meshText(const Program &p) {
  std::string text;
  for (const MeshAxis &axis : p.mesh)
    text += (text.empty() ? "" : " x ") + axis.name + "=" +
            std::to_string(axis.size);
  return text;
}

std::string human(int64_t bytes) {
  char text[32];
  if (bytes < 1024)
    std::snprintf(text, sizeof text, "%lld B", (long long)bytes);
  else if (bytes < 1024 * 1024)
    std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
  else if (bytes < (int64_t(1) << 30))
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  else
    std::snprintf(text, sizeof text, "%.2f GiB", bytes / 1073741824.0);
  return text;
}

/// Writes all of `text` to `fd` with write(2) alone (what a forked child
/// may do).
void writeAll(int fd, const char *text) {
  size_t length = std::strlen(text);
  while (length > 0) {
    ssize_t n = write(fd, text, length);
    if (n <= 0)
      return;
    text += n;
    length -= size_t(n);
  }
}

/// Why `backend`'s device cannot be made here, or nullopt where it can.
/// With `apart`, it is made in a child process: the launcher, which waits
/// for the whole job, must not keep a GPU context (memory on the first GPU,
/// and a device in exclusive-process mode refusing rank 0's own).
std::optional<std::string> backendError(const std::string &backend,
                                        bool apart) {
  if (!apart) {
    try {
      createDevice(backend);
    } catch (const DeviceError &e) {
      return std::string(e.what());
    }
    return std::nullopt;
  }
  int fds[2];
  if (pipe(fds) != 0)
    return "cannot probe the backend: " + std::string(std::strerror(errno));
  std::fflush(nullptr);
  pid_t child = fork();
  if (child < 0) {
    int error = errno;
    close(fds[0]);
    close(fds[1]);
    return "cannot probe the backend: " + std::string(std::strerror(error));
  }
  if (child == 0) {
    close(fds[0]);
    int code = 0;
    try {
      createDevice(backend);
    } catch (const DeviceError &e) {
      writeAll(fds[1], e.what());
      code = 1;
    }
    _exit(code);
  }
  close(fds[1]);
  std::string message;
  char buffer[512];
  for (;;) {
    ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0)
      message.append(buffer, size_t(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return std::nullopt;
  if (!message.empty())
    return message;
  return WIFSIGNALED(status) ? "the backend's probe was killed by signal " +
                                   std::to_string(WTERMSIG(status))
                             : "the backend's probe failed";
}

/// The mpirun child par-run waits on, for the signal forwarder.
volatile sig_atomic_t launchedChild = 0;

/// The signals par-run passes on to mpirun.
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/// Passes a signal on to mpirun, which stops the ranks. mpirun is in a
/// process group of its own, so this is the only copy it gets (a second
/// SIGINT or SIGTERM makes it abort without stopping the ranks cleanly, a
/// third at once); it stops its ranks on SIGINT, SIGTERM and SIGHUP only,
/// so SIGQUIT reaches it as SIGTERM.
void forwardSignal(int signal) {
  int saved = errno;
  if (launchedChild > 0)
    kill(pid_t(launchedChild), signal == SIGQUIT ? SIGTERM : signal);
  errno = saved;
}

/// Starts the ranks through mpirun and waits for them; returns mpirun's exit
/// status (128 + the signal where it was killed).
///
/// Open MPI keeps its session files under $TMPDIR/ompi.<host>.<uid>, one
/// directory shared by every job of the user; two jobs started at the same
/// moment race to create it and one can fail ("A call to mkdir was unable
/// to create the desired directory ... File exists"). Each launch therefore
/// gets a directory of its own, removed when mpirun ends.
int launch(const Options &o, int64_t ranks,
           const std::vector<std::string> &rest) {
  std::string mpirun = findOnPath("mpirun");
  if (mpirun.empty()) {
    std::cerr << "par-run: error: mpirun is not on PATH; install Open MPI "
                 "(openmpi-bin) or start the ranks yourself: mpirun -np "
              << ranks << " par-run " << o.program << "\n";
    return 1;
  }
  char self[4096];
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) {
    std::cerr << "par-run: error: cannot find its own executable to launch\n";
    return 1;
  }
  self[length] = 0;
  // Under a base the user gave Open MPI, else under TMPDIR.
  const char *given = std::getenv("OMPI_MCA_orte_tmpdir_base");
  const char *tmp = std::getenv("TMPDIR");
  std::string base = given && *given ? given : tmp && *tmp ? tmp : "/tmp";
  // mkdtemp replaces the template's six X's with a name no other
  // directory has.
  std::string sessionDir = base + "/par-run.XXXXXX";
  if (!mkdtemp(sessionDir.data())) {
    std::cerr << "par-run: error: cannot create a directory for mpirun's "
                 "session files in "
              << base << ": " << std::strerror(errno) << " (set "
              << (given && *given ? "OMPI_MCA_orte_tmpdir_base" : "TMPDIR")
              << " to a writable directory)\n";
    return 1;
  }
  auto removeSessionDir = [&] {
    std::error_code ignored;
    std::filesystem::remove_all(sessionDir, ignored);
  };
  // mpirun runs in a process group of its own (so that it hears each
  // signal once, from par-run), away from the terminal: it forwards no
  // input (reading the terminal from another group would stop it).
  std::vector<std::string> args = {mpirun,
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "--stdin",
                                   "none",
                                   "--mca",
                                   "btl",
                                   "self,vader",
                                   "-np",
                                   std::to_string(ranks),
                                   self};
  args.insert(args.end(), rest.begin(), rest.end());
  setenv("PAR_RUN_LAUNCHED", "1", 1);
  // Open MPI 4 (orte) and 5 (prte) name the session base differently; each
  // ignores the other's.
  setenv("OMPI_MCA_orte_tmpdir_base", sessionDir.c_str(), 1);
  setenv("PRTE_MCA_prte_tmpdir_base", sessionDir.c_str(), 1);
  // The ranks share this machine's cores: each rank's kernels get its
  // share (one thread where the ranks already fill the cores), and split
  // their GEMMs over it themselves, so OpenBLAS runs one thread per call.
  setenv("PAR_CPU_THREADS",
         std::to_string(std::max<int64_t>(1, int64_t(usableCores()) / ranks))
             .c_str(),
         0);
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  // The GEMM kernels this CPU runs, where OpenBLAS does not recognize it.
  std::string core = blasCoreOverride();
  if (!core.empty())
    setenv("OPENBLAS_CORETYPE", core.c_str(), 0);
  std::vector<char *> argvOut;
  for (std::string &arg : args)
    argvOut.push_back(arg.data());
  argvOut.push_back(nullptr);
  std::string execError = "par-run: error: cannot start " + mpirun + "\n";
  std::fflush(nullptr);

  // The signals stay blocked from before the fork until the child is
  // known, so none is lost or kills par-run in between; the handlers and
  // SIGCHLD's disposition (an inherited SIG_IGN would reap mpirun for us)
  // are put back when it ends.
  sigset_t forwarded, previousMask;
  sigemptyset(&forwarded);
  for (int signal : kForwardedSignals)
    sigaddset(&forwarded, signal);
  sigprocmask(SIG_BLOCK, &forwarded, &previousMask);
  struct sigaction forward = {}, previous[std::size(kForwardedSignals)],
                   childDefault = {}, previousChild;
  forward.sa_handler = forwardSignal;
  sigemptyset(&forward.sa_mask);
  for (size_t i = 0; i < std::size(kForwardedSignals); ++i)
    sigaction(kForwardedSignals[i], &forward, &previous[i]);
  childDefault.sa_handler = SIG_DFL;
  sigemptyset(&childDefault.sa_mask);
  sigaction(SIGCHLD, &childDefault, &previousChild);
  auto restoreSignals = [&] {
    for (size_t i = 0; i < std::size(kForwardedSignals); ++i)
      sigaction(kForwardedSignals[i], &previous[i], nullptr);
    sigaction(SIGCHLD, &previousChild, nullptr);
    sigprocmask(SIG_SETMASK, &previousMask, nullptr);
  };

  pid_t child = fork();
  if (child < 0) {
    int error = errno;
    restoreSignals();
    removeSessionDir();
    std::cerr << "par-run: error: cannot start " << mpirun << ": "
              << std::strerror(error) << "\n";
    return 1;
  }
  if (child == 0) {
    // The handlers do nothing here (launchedChild is 0) until exec puts
    // them back to their defaults.
    setpgid(0, 0);
    sigprocmask(SIG_SETMASK, &previousMask, nullptr);
    execv(mpirun.c_str(), argvOut.data());
    writeAll(2, execError.c_str());
    _exit(127);
  }
  // Both sides set the group: whichever runs first.
  setpgid(child, child);
  launchedChild = child;
  sigprocmask(SIG_SETMASK, &previousMask, nullptr);
  // Waited for without reaping it first (WNOWAIT), so that its pid cannot
  // be reused while a signal may still be passed on to it.
  siginfo_t ended = {};
  int waited;
  do {
    waited = waitid(P_PID, id_t(child), &ended, WEXITED | WNOWAIT);
  } while (waited < 0 && errno == EINTR);
  int waitError = errno;
  sigprocmask(SIG_BLOCK, &forwarded, nullptr);
  launchedChild = 0;
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(child, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  restoreSignals();
  removeSessionDir();
  if (waited < 0 || reaped < 0) {
    std::cerr << "par-run: error: cannot wait for " << mpirun << ": "
              << std::strerror(waited < 0 ? waitError : errno) << "\n";
    return 1;
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

/// The output logged as the loss: one named "loss", else the first 0-d
/// floating-point output.
int64_t lossOutput(const Program &p) {
  int64_t found = -1;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const OutputSpec &out = p.outputs[i];
    if (!out.globalShape.empty() || !isFloat(out.dtype))
      continue;
    if (out.name == "loss")
      return int64_t(i);
    if (found < 0)
      found = int64_t(i);
  }
  return found;
}

/// Tokens per step: the global element count of the first token input.
int64_t tokensPerStep(const Program &p) {
  for (const InputSpec &in : p.inputs)
    if (in.role == InputRole::Data && in.data == DataKind::Tokens)
      return numElements(in.globalShape);
  return 0;
}

/// Test hook (docs/par-run.md): PAR_RUN_INJECT_STALL=RANK:STEP makes that
/// rank stop before that step, as a hung device would.
void maybeStall(int64_t rank, int64_t step) {
  const char *spec = std::getenv("PAR_RUN_INJECT_STALL");
  if (!spec)
    return;
  long long r = -1, s = -1;
  if (std::sscanf(spec, "%lld:%lld", &r, &s) == 2 && r == rank && s == step)
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
}

/// Ends the run with `code`; rank 0 carries the message, other ranks an
/// empty one (the job names the problem once).
class ExitRequest : public std::runtime_error {
public:
  ExitRequest(int code, const std::string &message)
      : std::runtime_error(message), code(code) {}
  int code;
};

void warn(const Options &o, int64_t step, const std::string &message) {
  if (o.json) {
    emitJson({{"event", "warning"}, {"step", step}, {"message", message}});
    return;
  }
  writeErrorLine("par-run: warning: step " + std::to_string(step) + ": " +
                 message);
}

/// What a step is checked for: the loss, the gradient norm (log.grad_norm),
/// every parameter and optimizer state after the update, and the count of
/// steps fp16 loss scaling skipped (log.skipped, whose state input is
/// loss_scale.skipped).
struct Watch {
  int64_t loss = -1, gradNorm = -1, skipped = -1, skippedState = -1;
  int64_t skippedBefore = -1; // agreed count before the step (-1: none)
};

Watch watchedQuantities(const Program &p, int64_t loss) {
  Watch watch;
  watch.loss = loss;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    if (!p.outputs[i].globalShape.empty())
      continue;
    if (p.outputs[i].name == "log.grad_norm")
      watch.gradNorm = int64_t(i);
    if (p.outputs[i].name == "log.skipped")
      watch.skipped = int64_t(i);
  }
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (p.inputs[i].name == "loss_scale.skipped" &&
        p.inputs[i].globalShape.empty())
      watch.skippedState = int64_t(i);
  return watch;
}

constexpr int64_t kNone = INT64_MAX;

/// The count of skipped steps in the state before the first step, agreed
/// (after each step it is that step's log.skipped).
int64_t skippedCount(Executor &exec, Collectives &comm, const Watch &watch) {
  if (watch.skipped < 0 || watch.skippedState < 0)
    return -1;
  std::vector<int64_t> value = {kNone};
  if (std::optional<double> count =
          exec.inputScalar(size_t(watch.skippedState)))
    value[0] = int64_t(*count);
  comm.agree(value, ReduceOp::Min);
  return value[0] == kNone ? -1 : value[0];
}

/// What every rank agrees a step produced: the first non-finite quantity
/// of the loss and the gradient norm (0 the loss, 1 the gradient norm,
/// kNone when both are finite), the first non-finite parameter or
/// optimizer state after the update (2 + its input index, or kNone), and
/// the skipped-step count after the step (-1: none). Each is checked on
/// its own, so a non-finite loss never hides a non-finite update.
struct StepHealth {
  int64_t badOutput = kNone;
  int64_t badState = kNone;
  int64_t skippedAfter = -1;
};

StepHealth checkStep(Executor &exec, Collectives &comm, const Watch &watch) {
  const Program &p = exec.program();
  int64_t badOutput = kNone, badState = kNone;
  if (watch.loss >= 0 && exec.outputNonFinite(size_t(watch.loss)))
    badOutput = 0;
  else if (watch.gradNorm >= 0 && exec.outputNonFinite(size_t(watch.gradNorm)))
    badOutput = 1;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (exec.holdsParam(i) && exec.inputNonFinite(i)) {
      badState = 2 + int64_t(i);
      break;
    }
  int64_t skipped = kNone;
  if (watch.skipped >= 0)
    if (std::optional<double> value = exec.localScalar(size_t(watch.skipped)))
      skipped = std::isfinite(*value) ? int64_t(*value) : kNone;
  std::vector<int64_t> values = {badOutput, badState, skipped};
  comm.agree(values, ReduceOp::Min);
  return {values[0], values[1], values[2] == kNone ? -1 : values[2]};
}

/// Every parameter and optimizer state is finite on every rank (before
/// the first step; after each, the step's check says).
bool stateFinite(Executor &exec, Collectives &comm) {
  const Program &p = exec.program();
  std::vector<int64_t> bad = {0};
  for (size_t i = 0; i < p.inputs.size() && !bad[0]; ++i)
    if (exec.holdsParam(i) && exec.inputNonFinite(i))
      bad[0] = 1;
  comm.agree(bad, ReduceOp::Max);
  return !bad[0];
}

std::string quantityName(const Program &p, int64_t bad) {
  if (bad == 0)
    return "the loss";
  if (bad == 1)
    return "the gradient norm (log.grad_norm)";
  return "the update of '" + p.inputs[size_t(bad - 2)].name + "'";
}

/// The first step a run resumed from `reader` takes; throws when the step
/// counter would overflow.
int64_t firstStepAfter(const CheckpointReader &reader, const Options &o) {
  if (reader.step() > INT64_MAX - 1 - o.steps)
    throw RunError("--load " + o.load + ": step " +
                   std::to_string(reader.step()) + " of " +
                   reader.indexPath() + " plus --steps " +
                   std::to_string(o.steps) + " overflows the step counter");
  return reader.step() + 1;
}

/// Acts on a step's health as --on-nonfinite says; every rank takes the
/// same decision from the agreed health. Sets `undo` when the step's
/// update must be undone; `kept` says which checkpoint a stop leaves.
void handleNonFinite(const Options &o, const Program &p, const Watch &watch,
                     const StepHealth &health, int64_t step,
                     int64_t &skipsInARow, int64_t &scalingSkips, bool &undo,
                     int rank, const std::function<std::string()> &kept) {
  // A step fp16 loss scaling skipped by design is no event, unless its
  // parameters came out non-finite all the same.
  bool scalingSkip = watch.skippedBefore >= 0 && health.skippedAfter >= 0 &&
                     health.skippedAfter > watch.skippedBefore;
  bool event = health.badState != kNone ||
               (health.badOutput != kNone && !scalingSkip);
  int64_t first = scalingSkip ? health.badState
                              : std::min(health.badOutput, health.badState);
  if (scalingSkip)
    ++scalingSkips;
  if (!event) {
    skipsInARow = scalingSkip ? skipsInARow + 1 : 0;
  } else {
    std::string what = quantityName(p, first) + " is not finite";
    switch (o.onNonFinite) {
    case Options::NonFinite::Stop:
      throw ExitRequest(kExitNonFinite,
                        rank == 0 ? "step " + std::to_string(step) + ": " +
                                        what +
                                        "; stopping (--on-nonfinite=stop); " +
                                        kept()
                                  : "");
    case Options::NonFinite::Skip:
      undo = true;
      ++skipsInARow;
      if (rank == 0)
        warn(o, step,
             what + "; the step's update is undone (--on-nonfinite=skip)");
      break;
    case Options::NonFinite::Warn:
      skipsInARow = 0;
      if (rank == 0)
        warn(o, step, what + " (--on-nonfinite=warn)");
      break;
    }
  }
  if (skipsInARow > o.maxSkipped)
    throw ExitRequest(
        kExitNonFinite,
        rank == 0 ? "step " + std::to_string(step) + ": " +
                        std::to_string(skipsInARow) +
                        " steps in a row were skipped (--max-skipped-steps " +
                        std::to_string(o.maxSkipped) +
                        "): the run diverged; stopping; " + kept()
                  : "");
}

int runRank(const Options &o, int rank, int size) {
  Program program = loadProgram(o.program);
  if (size != program.numRanks) {
    if (rank == 0)
      std::cerr << "par-run: error: " << o.program << " runs on "
                << program.numRanks << " ranks (mesh " << meshText(program)
                << ") but " << size << " were started"
                << (mpiBuiltIn() ? ""
                                 : " (this par-run was built without MPI "
                                   "and runs one rank)")
                << "\n";
    return 1;
  }
  // The device before the collectives that may run on it: destroyed after.
  std::unique_ptr<Device> device = createDevice(o.backend);
  // Free device memory before the communicators, the arena and the
  // scratch, and after the first step (libraries that allocate lazily):
  // what is gone beyond the arena and scratch is the libraries' own.
  const int64_t freeAtStart = device->freeBytes();
  int64_t freeAfterStep = -1;
  std::unique_ptr<Collectives> comm = createMpiCollectives(program, o.timeout);
  std::unique_ptr<Tracer> tracer;
  if (!o.trace.empty())
    tracer = std::make_unique<Tracer>(rank);
  // A read of --data that stalls is an error after --timeout (0: never).
  DataSource data =
      o.data == "synthetic" ? DataSource() : DataSource(o.data, o.timeout);
  // A device with memory of its own runs its collectives on it (NCCL
  // where built in), or through host copies over MPI.
  if (o.stagedCollectives)
    comm = createStagedCollectives(std::move(comm), *device);
  else if (device->memorySpace() == MemorySpace::Device)
    comm = createDeviceCollectives(std::move(comm), *device,
                                   int64_t(program.groups.size()), o.timeout);
  Executor exec(program, *device, *comm, tracer.get());
  const RankClass &rc = exec.rankClass();

  int64_t first = 1;
  if (!o.load.empty()) {
    // A damaged checkpoint fails on every rank that reads it: the job
    // reports the first such rank once.
    uint32_t loaded = 0;
    agreeOnErrors(*comm, [&] {
      CheckpointReader reader(o.load);
      first = firstStepAfter(reader, o);
      exec.loadParams(reader);
      loaded = crc32c(reader.indexPath().data(), reader.indexPath().size(),
                      crc32c(reader.manifest().saveId.data(),
                             reader.manifest().saveId.size()));
    });
    // Every rank must have read the same checkpoint (a directory that
    // changed while the ranks read it would give a mixed state).
    std::vector<int64_t> low = {first, int64_t(loaded)}, high = low;
    comm->agree(low, ReduceOp::Min);
    comm->agree(high, ReduceOp::Max);
    if (low != high) {
      if (rank != 0)
        throw ReportedElsewhere();
      throw AgreedError("--load " + o.load +
                        ": the ranks read different checkpoints (did the "
                        "directory change while they read it?)");
    }
  } else {
    exec.initParams(o.seed);
  }
  if (rank == 0 && o.json) {
    emitJson({{"event", "start"},
              {"function", program.function},
              {"ranks", size},
              {"mesh", meshText(program)},
              {"backend", o.backend},
              {"instructions", rc.instructions.size()},
              {"arena_bytes", rc.arenaBytes},
              {"data", data.describe()},
              {"seed", o.seed},
              {"first_step", first}});
  } else if (rank == 0) {
    std::printf(
        "par-run: %s on %d rank(s) (mesh %s), %s backend, %zu instructions, "
        "arena %s per rank\n",
        program.function.c_str(), size, meshText(program).c_str(),
        o.backend.c_str(), rc.instructions.size(),
        human(rc.arenaBytes).c_str());
    std::printf("par-run: data: %s, seed %llu%s\n", data.describe().c_str(),
                (unsigned long long)o.seed,
                o.load.empty() ? ""
                               : (", resumed from " + o.load + " at step " +
                                  std::to_string(first - 1))
                                     .c_str());
    std::fflush(stdout);
  }

  int64_t loss = lossOutput(program);
  // Other 0-d outputs named "log.X" (learning rate, gradient norm, loss
  // scale, skipped steps) are shown as "X value" after the loss.
  std::vector<size_t> logged;
  for (size_t i = 0; i < program.outputs.size(); ++i)
    if (program.outputs[i].name.rfind("log.", 0) == 0 &&
        program.outputs[i].globalShape.empty())
      logged.push_back(i);
  int64_t tokens = tokensPerStep(program);
  int64_t peak = 0;
  double totalSeconds = 0;
  int64_t last = first + o.steps - 1;
  auto logStep = [&](int64_t step, double seconds) {
      bool log = o.logEvery > 0 &&
                 ((step - first + 1) % o.logEvery == 0 || step == last);
      if (!log)
        return;
      std::vector<double> value;
      if (loss >= 0)
        value = exec.gatherOutput(size_t(loss));
      std::vector<std::vector<double>> extras;
      for (size_t i : logged)
        extras.push_back(exec.gatherOutput(i));
      if (rank != 0)
        return;
      if (o.json) {
        nlohmann::json event = {{"event", "step"},
                                {"step", step},
                                {"seconds", seconds},
                                {"peak_bytes", peak},
                                {"planned_bytes", rc.arenaBytes}};
        if (!value.empty())
          event["loss"] = jsonNumber(value[0]);
        nlohmann::json logs = nlohmann::json::object();
        for (size_t k = 0; k < logged.size(); ++k)
          logs[program.outputs[logged[k]].name.substr(4)] =
              jsonNumber(extras[k].empty() ? 0.0 : extras[k][0]);
        event["log"] = logs;
        if (tokens)
          event["tokens_per_s"] = double(tokens) / seconds;
        emitJson(event);
        return;
      }
      std::string line = "step " + std::to_string(step);
      char buf[128];
      if (!value.empty()) {
        // Significant digits: a loss of 2.6e-5 keeps its precision.
        std::snprintf(buf, sizeof buf, "  loss %.7g", value[0]);
        line += buf;
      }
      for (size_t k = 0; k < logged.size(); ++k) {
        std::snprintf(buf, sizeof buf, "  %s %.4g",
                      program.outputs[logged[k]].name.substr(4).c_str(),
                      extras[k].empty() ? 0.0 : extras[k][0]);
        line += buf;
      }
      if (tokens) {
        std::snprintf(buf, sizeof buf, "  %.0f tokens/s",
                      double(tokens) / seconds);
        line += buf;
      }
      std::snprintf(buf, sizeof buf, "  %.2f ms", seconds * 1e3);
      line += buf;
      line += "  peak " + human(peak) + " (plan " + human(rc.arenaBytes) + ")";
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
  };
  Watch watch = watchedQuantities(program, loss);
  Executor::State before;
  int64_t skipsInARow = 0, scalingSkips = 0;
  // Whether the parameters and optimizer states are finite now: checked
  // once here when saves may come, then known from each step's check.
  bool finiteState = o.save.empty() || stateFinite(exec, *comm);
  watch.skippedBefore = skippedCount(exec, *comm, watch);
  int64_t lastSaved = -1;
  auto keptCheckpoint = [&]() -> std::string {
    if (o.save.empty())
      return "nothing was saved";
    if (lastSaved < 0)
      return "nothing was saved to " + o.save + " by this run";
    return "the last checkpoint, step " + std::to_string(lastSaved) + " in " +
           o.save + ", is left as it was";
  };
  auto save = [&](int64_t step, bool final) {
    std::map<std::string, std::string> metadata = {
        {"mesh", meshText(program)},
        {"function", program.function},
        {"program", o.program}};
    if (!finiteState) {
      std::string message = "not saving step " + std::to_string(step) +
                            " to " + o.save +
                            ": parameters or optimizer states are not "
                            "finite; " + keptCheckpoint();
      if (final)
        throw ExitRequest(kExitNonFinite, rank == 0 ? message : "");
      if (rank == 0)
        warn(o, step, message);
      return;
    }
    SaveResult saved =
        saveCheckpoint(exec, *comm, o.save, step, o.keep, metadata);
    lastSaved = step;
    if (rank == 0 && o.json)
      emitJson({{"event", "save"},
                {"step", step},
                {"dir", o.save},
                {"directory", saved.directory},
                {"removed", saved.removed}});
    else if (rank == 0)
      std::printf("par-run: saved step %lld to %s\n", (long long)step,
                  o.save.c_str());
    std::fflush(stdout);
  };
  for (int64_t step = first; step <= last; ++step) {
    maybeStall(rank, step);
    auto start = std::chrono::steady_clock::now();
    double traceStart = tracer ? tracer->now() : 0;
    if (o.onNonFinite == Options::NonFinite::Skip)
      before = exec.saveState();
    exec.feedData(data, o.seed, step);
    exec.runStep(step);
    if (step == first)
      freeAfterStep = device->freeBytes();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (tracer)
      tracer->record("step " + std::to_string(step), Tracer::Host, traceStart,
                     tracer->now(), step);
    totalSeconds += seconds;
    peak = std::max(peak, exec.measuredPeak());

    StepHealth health = checkStep(exec, *comm, watch);
    bool undo = false;
    handleNonFinite(o, program, watch, health, step, skipsInARow, scalingSkips,
                    undo, rank, keptCheckpoint);
    if (undo)
      exec.restoreState(before); // the state, its skipped count included
    else
      watch.skippedBefore = health.skippedAfter;
    finiteState = health.badState == kNone || (undo && finiteState);
    logStep(step, seconds);
    if (o.saveEvery > 0 && step % o.saveEvery == 0 && step != last)
      save(step, /*final=*/false);
  }
  if (peak > rc.arenaBytes)
    throw RunError("rank " + std::to_string(rank) +
                   ": memory written up to byte " + std::to_string(peak) +
                   ", past the planned arena of " +
                   std::to_string(rc.arenaBytes) +
                   " bytes (a kernel wrote out of bounds)");

  if (!o.dumpOutputs.empty()) {
    nlohmann::json outputs = nlohmann::json::object();
    for (size_t i = 0; i < program.outputs.size(); ++i) {
      std::vector<double> value = exec.gatherOutput(i);
      if (rank == 0) {
        nlohmann::json values = nlohmann::json::array();
        for (double v : value)
          values.push_back(jsonNumber(v));
        outputs[program.outputs[i].name] = {
            {"shape", program.outputs[i].savedShape()},
            {"dtype", dtypeName(program.outputs[i].dtype)},
            {"values", std::move(values)}};
      }
    }
    std::vector<std::string> peaks = comm->gatherToRoot(std::to_string(peak));
    if (rank == 0) {
      nlohmann::json measured = nlohmann::json::array();
      for (const std::string &p : peaks)
        measured.push_back(std::stoll(p));
      const Executor::Traffic &traffic = exec.lastStepTraffic();
      std::string text =
          nlohmann::json{{"step", last},
                         {"outputs", outputs},
                         {"memory",
                          {{"planned", rc.arenaBytes}, {"measured", measured}}},
                         {"communication",
                          {{"collectives", traffic.collectives},
                           {"moved_elements", traffic.movedElements},
                           {"sent_bytes", traffic.sentBytes}}}}
              .dump() +
          "\n";
      try {
        writeFileAtomically(o.dumpOutputs, {{text.data(), text.size()}},
                            "dump");
      } catch (const FileError &e) {
        throw RunError(std::string("--dump-outputs: ") + e.what());
      }
    }
  }

  if (tracer) {
    std::vector<std::string> all = comm->gatherToRoot(tracer->serialize());
    if (rank == 0) {
      Tracer::write(o.trace, all);
      if (!o.json)
        std::printf("par-run: trace of %d rank(s) written to %s\n", size,
                    o.trace.c_str());
    }
  }
  // The outputs and the trace are written first: a refused save leaves
  // them to look at.
  if (!o.save.empty() && o.steps > 0)
    save(last, /*final=*/true);
  if (rank == 0 && scalingSkips > 0 && !o.json)
    std::printf("par-run: %lld step(s) skipped by loss scaling\n",
                (long long)scalingSkips);

  // A pipelined program's stages plan their own arenas: each stage's
  // measured peak (the most of its ranks) against its plan.
  nlohmann::json stages = nlohmann::json::array();
  if (program.rankClasses.size() > 1 && o.steps > 0) {
    std::vector<std::string> peaks =
        comm->gatherToRoot(std::to_string(peak));
    for (size_t c = 0; c < program.rankClasses.size() && rank == 0; ++c) {
      const RankClass &cls = program.rankClasses[c];
      int64_t measured = 0;
      for (int64_t r : cls.ranks)
        measured = std::max<int64_t>(measured,
                                     std::stoll(peaks.at(size_t(r))));
      stages.push_back({{"ranks", cls.ranks},
                        {"peak_bytes", measured},
                        {"planned_bytes", cls.arenaBytes}});
    }
  }
  // A pipelined program's bubble: as the compiler predicted it, replayed
  // from the instruction times each stage measured, and each stage's
  // wall-clock idle over busy time (docs/par-run.md).
  nlohmann::json bubble;
  if (program.pipeline && o.steps > 0) {
    const Executor::SlotTiming *timing = exec.slotTiming();
    nlohmann::json mine = {{"wall", timing->wall},
                           {"busy", timing->busy},
                           {"steps", timing->steps},
                           {"seconds", timing->seconds}};
    std::vector<std::string> all = comm->gatherToRoot(mine.dump());
    if (rank == 0) {
      size_t classes = program.rankClasses.size();
      std::vector<std::vector<double>> seconds(classes);
      std::vector<double> idle(classes, 0.0);
      // Each rank's own wall-clock idle over busy time, by rank.
      std::vector<double> rankIdle(all.size(), 0.0);
      for (size_t c = 0; c < classes; ++c) {
        const RankClass &cls = program.rankClasses[c];
        // Each instruction's shortest time over the class's ranks (the
        // rank that reached a collective last waited least in it).
        seconds[c].assign(cls.instructions.size(), 0.0);
        for (size_t n = 0; n < cls.ranks.size(); ++n) {
          int64_t r = cls.ranks[n];
          nlohmann::json t = nlohmann::json::parse(all.at(size_t(r)));
          double share = 1.0 / double(cls.ranks.size());
          auto times = t["seconds"].get<std::vector<double>>();
          for (size_t i = 0; i < times.size() && i < seconds[c].size(); ++i)
            seconds[c][i] = n == 0 ? times[i] : std::min(seconds[c][i], times[i]);
          double busy = t["busy"].get<double>();
          if (busy > 0) {
            double fraction = (t["wall"].get<double>() - busy) / busy;
            idle[c] += fraction * share;
            rankIdle.at(size_t(r)) = fraction;
          }
        }
      }
      // An extra report: a replay that cannot finish is a warning, not a
      // failed run.
      BubbleReplay replay;
      try {
        replay = replayPipeline(program, seconds);
      } catch (const std::exception &e) {
        std::fprintf(stderr, "par-run: warning: %s\n", e.what());
      }
      bubble = {{"schedule", program.pipeline->schedule},
                {"stages", program.pipeline->stages},
                {"microbatches", program.pipeline->microbatches},
                {"predicted", program.pipeline->predictedBubble},
                {"replayed", replay.bubble},
                {"replayed_step_seconds", replay.makespan},
                {"busy_seconds", replay.busy},
                {"measured", idle},
                {"measured_ranks", rankIdle}};
    }
  }

  // Device memory gone over the run beyond the arena and the scratch
  // (-1 where the device cannot tell).
  int64_t outsidePlan = -1;
  if (freeAtStart >= 0 && freeAfterStep >= 0)
    outsidePlan = std::max<int64_t>(
        0, freeAtStart - freeAfterStep - rc.arenaBytes -
               exec.kernelScratchBytes() - exec.commScratchBytes());
  if (rank == 0 && o.json) {
    const Executor::Traffic &traffic = exec.lastStepTraffic();
    if (!stages.empty())
      emitJson({{"event", "stages"}, {"stages", stages}});
    if (!bubble.is_null())
      emitJson({{"event", "bubble"}, {"bubble", bubble}});
    emitJson({{"event", "end"},
              {"steps", o.steps},
              {"seconds", totalSeconds},
              {"peak_bytes", peak},
              {"planned_bytes", rc.arenaBytes},
              {"kernel_scratch_bytes", exec.kernelScratchBytes()},
              {"collective_scratch_bytes", exec.commScratchBytes()},
              {"outside_plan_bytes", outsidePlan},
              {"collectives", traffic.collectives},
              {"moved_elements", traffic.movedElements},
              {"sent_bytes", traffic.sentBytes}});
  } else if (rank == 0 && o.steps > 0) {
    std::printf("par-run: %lld step(s) in %.3f s; measured peak %s of %s "
                "planned per rank\n",
                (long long)o.steps, totalSeconds, human(peak).c_str(),
                human(rc.arenaBytes).c_str());
    if (device->memorySpace() == MemorySpace::Device)
      std::printf(
          "par-run: device memory on rank 0: arena %s, scratch %s "
          "(kernels %s, collectives %s), outside the plan %s "
          "(NCCL, cuBLASLt, loaded kernels: measured)\n",
          human(rc.arenaBytes).c_str(),
          human(exec.kernelScratchBytes() + exec.commScratchBytes()).c_str(),
          human(exec.kernelScratchBytes()).c_str(),
          human(exec.commScratchBytes()).c_str(),
          outsidePlan < 0 ? "unknown" : human(outsidePlan).c_str());
    for (size_t c = 0; c < stages.size(); ++c)
      std::printf("par-run: rank class %zu (ranks %s): measured peak %s of "
                  "%s planned\n",
                  c, stages[c]["ranks"].dump().c_str(),
                  human(stages[c]["peak_bytes"].get<int64_t>()).c_str(),
                  human(stages[c]["planned_bytes"].get<int64_t>()).c_str());
    if (!bubble.is_null()) {
      std::string idle;
      for (double x : bubble["measured"]) {
        char text[32];
        std::snprintf(text, sizeof text, "%.3f", x);
        idle += (idle.empty() ? "" : ", ") + std::string(text);
      }
      unsigned cores = usableCores();
      std::printf(
          "par-run: pipeline bubble (%s, %lld stages x %lld micro-batches): "
          "predicted %.3f; from the measured instruction times %.3f; "
          "wall-clock idle over busy per stage %s%s\n",
          program.pipeline->schedule.c_str(),
          (long long)program.pipeline->stages,
          (long long)program.pipeline->microbatches,
          bubble["predicted"].get<double>(), bubble["replayed"].get<double>(),
          idle.c_str(),
          size > int(cores) ? " (ranks share cores: read the replayed figure)"
                            : "");
    }
    const Executor::Traffic &traffic = exec.lastStepTraffic();
    if (traffic.collectives)
      std::printf(
          "par-run: rank 0 per step: %lld collective(s), %lld elements moved, "
          "%s sent\n",
          (long long)traffic.collectives, (long long)traffic.movedElements,
          human(traffic.sentBytes).c_str());
  }
  comm->barrier();
  return 0;
}

/// --calibrate on every rank: rank 0 writes the profile (atomically: a
/// temporary file renamed over the target).
int calibrateRanks(const Options &o, int rank, int size) {
  Program world = worldProgram(size);
  std::unique_ptr<Collectives> comm = createMpiCollectives(world, o.timeout);
  CalibrationOptions options;
  options.minSeconds = o.minTime;
  std::string stem = o.output.substr(o.output.find_last_of('/') + 1);
  options.name = stem.substr(0, stem.rfind(".json"));
  if (options.name.empty())
    options.name = "calibrated";
  HardwareProfile profile =
      calibrate(*comm, options, rank == 0 ? &std::cout : nullptr);
  int code = 0;
  if (rank == 0) {
    std::string temporary = o.output + ".tmp";
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << hardwareProfileJson(profile);
      out.close();
      if (!out)
        code = 1;
    }
    if (code || std::rename(temporary.c_str(), o.output.c_str()) != 0) {
      reportError(rank, "--calibrate: cannot write '" + o.output +
                            "': " + std::strerror(errno),
                  /*nameRank=*/false);
      std::remove(temporary.c_str());
      code = 1;
    } else {
      std::cout << "par-run: wrote hardware profile '" << profile.name
                << "' to " << o.output << "\n";
    }
  }
  comm->barrier();
  comm.reset();
  return code;
}

} // namespace

int main(int argc, char **argv) {
  // A file-size limit (ulimit -f) makes writes fail with EFBIG, reported
  // like a full disk, instead of killing the rank.
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> rest;
  Options o = parseOptions(argc, argv, rest);
  // The CPU kernels' threads: a malformed PAR_CPU_THREADS is an error up
  // front, on every rank.
  try {
    cpuThreads();
  } catch (const std::invalid_argument &e) {
    std::cerr << "par-run: error: " << e.what() << "\n";
    return 1;
  }
  // How the CUDA backend runs fused groups: 1 compiled (the default), 0
  // interpreted.
  if (const char *jit = std::getenv("PAR_CUDA_JIT");
      jit && std::string(jit) != "0" && std::string(jit) != "1") {
    std::cerr << "par-run: error: PAR_CUDA_JIT=" << jit
              << ": expected 1 (compile fused groups, the default) or 0 "
                 "(interpret them)\n";
    return 1;
  }
  // How the CUDA backend runs bf16/f16 attention: mma on tensor cores
  // (the default), simt with the f32 kernels.
  if (const char *kernels = std::getenv("PAR_CUDA_ATTENTION");
      kernels && std::string(kernels) != "mma" &&
      std::string(kernels) != "simt") {
    std::cerr << "par-run: error: PAR_CUDA_ATTENTION=" << kernels
              << ": expected mma (tensor cores, the default) or simt (the "
                 "f32 kernels)\n";
    return 1;
  }
  // The device seam: a backend that is not built in, or has no device
  // here, is an error up front.
  if (std::optional<std::string> error = backendError(
          o.backend, /*apart=*/!underLauncher() && o.backend != "cpu")) {
    std::cerr << "par-run: error: --backend=" << o.backend << ": " << *error
              << "\n";
    return 1;
  }

  if (o.calibrate && !underLauncher()) {
    // The profile's directory must be writable before the measuring.
    size_t slash = o.output.find_last_of('/');
    std::string dir = slash == std::string::npos ? "."
                      : slash == 0               ? "/"
                                                 : o.output.substr(0, slash);
    if (access(dir.c_str(), W_OK) != 0) {
      std::cerr << "par-run: error: --calibrate: cannot write '" << o.output
                << "': " << std::strerror(errno) << "\n";
      return 1;
    }
    if (mpiBuiltIn())
      return launch(o, o.np > 0 ? o.np : 1, rest);
  }
  if (!underLauncher() && mpiBuiltIn()) {
    // Everything that can be checked before starting ranks is checked here.
    Program program;
    try {
      program = loadProgram(o.program);
      if (o.data != "synthetic")
        DataSource check(o.data);
      if (!o.load.empty()) {
        CheckpointReader check(o.load);
        (void)firstStepAfter(check, o);
      }
    } catch (const std::exception &e) {
      std::cerr << "par-run: error: " << e.what() << "\n";
      return 1;
    }
    if (o.np >= 0 && o.np != program.numRanks) {
      std::cerr << "par-run: error: -np " << o.np << " does not match "
                << o.program << ", which runs on " << program.numRanks
                << " ranks (mesh " << meshText(program)
                << "); recompile for another mesh with "
                   "par-opt --mesh=...\n";
      return 1;
    }
    return launch(o, program.numRanks, rest);
  }

  if (!mpiBuiltIn() && o.np > 1) {
    std::cerr << "par-run: error: -np " << o.np
              << ": this par-run was built without MPI and runs one rank "
                 "(rebuild it with MPI for more)\n";
    return 1;
  }
  auto [rank, size] = initMpi(&argc, &argv);
  setInjectionRank(rank);
  // Test hook (docs/par-run.md): a file-size limit from here on, as a disk
  // that fills (set after MPI has made its own session files).
  if (const char *limit = std::getenv("PAR_RUN_INJECT_FILE_LIMIT")) {
    rlim_t bytes = rlim_t(std::strtoull(limit, nullptr, 10));
    struct rlimit rl = {bytes, bytes};
    (void)::setrlimit(RLIMIT_FSIZE, &rl);
  }
  int code = 0;
  try {
    code = o.calibrate ? calibrateRanks(o, rank, size) : runRank(o, rank, size);
  } catch (const CommError &e) {
    reportError(rank, e.what());
    // Give the other ranks of the group time to report their side.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    abortMpi(3);
  } catch (const ProgramError &e) {
    if (rank == 0)
      reportError(rank, e.what(), /*nameRank=*/false);
    code = 1;
  } catch (const ExitRequest &e) {
    // Agreed by every rank: rank 0 says why, all exit alike.
    if (rank == 0 && *e.what())
      reportError(rank, e.what(), /*nameRank=*/false);
    code = e.code;
  } catch (const AgreedError &e) {
    if (rank == 0 && *e.what())
      reportError(rank, e.what(), /*nameRank=*/false);
    code = 1;
  } catch (const std::exception &e) {
    // This rank alone failed (memory, I/O, a kernel): it names itself and
    // ends the job, so no other rank waits for it.
    reportError(rank, e.what());
    if (size > 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      abortMpi(1);
    }
    code = 1;
  }
  finalizeMpi();
  return code;
}
