//===- MlirTarget.cpp - par-opt's parse, verify and lower on fuzzed input -===//
//
// What `par-opt IN --mesh=SPEC --par-propagate --par-partition
// --emit-program=FILE` does, in process: diagnostics are swallowed (a
// rejected input is fine), and the program written must load in par-run.
//
//===----------------------------------------------------------------------===//

#include "FuzzTargets.h"

#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Transforms/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace mlir;

namespace par::fuzz {

static MLIRContext *context = nullptr;

namespace {
/// Names the pass that runs, for a crash's report.
struct StageTracker : public PassInstrumentation {
  void runBeforePass(Pass *pass, Operation *) override {
    stage = "--" + pass->getArgument().str();
    currentStage = stage.c_str();
  }
  std::string stage;
};
} // namespace

void initMlirTarget() {
  if (context)
    return;
  llvm::install_fatal_error_handler(
      [](void *, const char *reason, bool) {
        std::fprintf(stderr, "par-fuzz: fatal error: %s\n", reason);
        std::fflush(stderr);
        _exit(kExitFatalError);
      },
      nullptr);
  DialectRegistry registry;
  registry.insert<mlir::par::ParDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
  mlir::par::registerParPassesAndPipelines();
  registerCanonicalizerPass();
  registerCSEPass();
  // One thread: the driver forks a child per input.
  context = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
}

/// The options of the first line `// par-fuzz: mesh=SPEC passes=PIPELINE`
/// (the pipeline runs to the end of the line: pass options hold spaces).
static void readHeader(llvm::StringRef text, std::string &mesh,
                       std::string &passes) {
  passes = "par-propagate,par-partition";
  llvm::StringRef line = text.take_until([](char c) { return c == '\n'; });
  if (!line.consume_front("// par-fuzz:"))
    return;
  auto [options, pipeline] = line.split("passes=");
  if (line.contains("passes="))
    passes = pipeline.trim().str();
  llvm::SmallVector<llvm::StringRef> words;
  options.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef word : words)
    if (word.consume_front("mesh="))
      mesh = word.str();
}

Outcome runMlirInput(const uint8_t *data, size_t size) {
  initMlirTarget();
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::string mesh, passes;
  readHeader(text, mesh, passes);
  // MLIR's own parser crashes on a dense array of index elements
  // (known/upstream-dense-array-index.mlir): not par's to fix.
  if (text.contains("array<index"))
    return Outcome::Rejected;

  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.mlir"), llvm::SMLoc());
  // As par-opt: with --mesh, verification waits until the mesh is set.
  ParserConfig config(context, /*verifyAfterParse=*/mesh.empty());
  currentStage = "the MLIR parser";
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, config);
  if (!module)
    return Outcome::Rejected;

  const char *tmp = std::getenv("TMPDIR");
  std::string file = std::string(tmp && *tmp ? tmp : "/tmp") + "/par-fuzz-" +
                     std::to_string(getpid()) + ".json";
  std::remove(file.c_str());

  // The pipeline comes from the input: no pass that writes files.
  if (llvm::StringRef(passes).contains("file") ||
      llvm::StringRef(passes).contains("emit") ||
      llvm::StringRef(passes).contains("report"))
    return Outcome::Rejected;
  PassManager pm(context);
  if (!mesh.empty())
    pm.addPass(
        mlir::par::createSetMeshPass(mlir::par::SetMeshPassOptions{mesh}));
  std::string error;
  llvm::raw_string_ostream errors(error);
  // Added to `pm` itself (a builtin.module(...) anchor would nest them).
  if (failed(parsePassPipeline(passes, pm, errors)))
    return Outcome::Rejected;
  pm.addPass(mlir::par::createSchedulePass());
  mlir::par::EmitProgramPassOptions emit;
  emit.file = file;
  pm.addPass(mlir::par::createEmitProgramPass(emit));
  pm.addInstrumentation(std::make_unique<StageTracker>());
  if (failed(pm.run(*module))) {
    std::remove(file.c_str());
    return Outcome::Rejected;
  }

  std::ifstream in(file, std::ios::binary);
  std::stringstream program;
  program << in.rdbuf();
  std::remove(file.c_str());
  currentStage = "the program loader";
  if (!programLoads(program.str(), error)) {
    std::fprintf(stderr,
                 "par-fuzz: par-opt emitted a program par-run rejects: %s\n",
                 error.c_str());
    std::fflush(stderr);
    _exit(kExitRoundTrip);
  }
  return Outcome::Accepted;
}

} // namespace par::fuzz
