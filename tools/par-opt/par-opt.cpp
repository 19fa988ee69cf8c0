//===- par-opt.cpp - the par compiler driver ------------------------------===//
//
// mlir-opt with the par dialect and passes, plus --mesh=SPEC to create or
// override the module's mesh before any other pass runs,
// --emit-program=FILE to write the runtime program after all other passes,
// and --report to print memory by category and traffic after them.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/MeshSpec.h"
#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Transforms/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static llvm::cl::OptionCategory parCategory("par options");

static llvm::cl::opt<std::string> meshOption(
    "mesh",
    llvm::cl::desc("Create or override the module's device mesh before any "
                   "pass: named axes like dp=2,tp=4,pp=4, or sizes like "
                   "4x4x2 that resize the module's axes in order and keep "
                   "their names (extra sizes add axes named by position: x, "
                   "y, z, w; a0, a1, ... past four)"),
    llvm::cl::value_desc("spec"), llvm::cl::init(""),
    llvm::cl::cat(parCategory));

static llvm::cl::opt<std::string> emitProgramOption(
    "emit-program",
    llvm::cl::desc("After all other passes, order the ops (--par-schedule) "
                   "and write the runtime program par-run executes to FILE "
                   "(--par-emit-program); see docs/program-format.md"),
    llvm::cl::value_desc("file"), llvm::cl::init(""),
    llvm::cl::cat(parCategory));

static llvm::cl::opt<bool> reportOption(
    "report",
    llvm::cl::desc("After all other passes, order the ops (--par-schedule) "
                   "and print per-device memory by category (parameters, "
                   "gradients, optimizer states, activations, temporaries) "
                   "against the planned peak, communication per step by "
                   "collective and mesh axes, the predicted step time and "
                   "MFU on a hardware profile, and the --auto-shard plan "
                   "with its alternatives, to standard error (--par-report)"),
    llvm::cl::init(false), llvm::cl::cat(parCategory));

/// What --help says first: par's options and passes by task.
static const char *const overview =
    "par compiler driver: the par dialect and its passes\n\n"
    "par's options and passes by task (each pass is listed with its options "
    "under 'Compiler passes to run' below; docs/getting-started.md):\n"
    "  plan       --mesh=SPEC, --auto-shard=\"hardware=NAME memory=SIZE "
    "pipeline=auto|off\n"
    "             sequence=auto|off fuse=auto|on|off\",\n"
    "             --par-propagate,\n"
    "             --par-explain-sharding, --par-summary\n"
    "  train      --par-autodiff=\"optimizer=adamw zero=N ...\", --par-zero,\n"
    "             --par-remat=none|selective|full|auto:budget=SIZE,\n"
    "             --par-pipeline=\"microbatches=M divide-batch "
    "schedule=gpipe|1f1b|interleaved|zb-h1|auto\"\n"
    "  partition  --par-partition (--par-zero, --par-split-checkpoints, "
    "--par-insert-reshards,\n"
    "             --par-sink-partials, --par-to-local, "
    "--par-combine-collectives)\n"
    "  emit       --par-fuse, --emit-program=FILE (--par-schedule, "
    "--par-emit-program)\n"
    "  report     --report, --par-comm-report, --par-memory-plan\n"
    "LLVM code-generation options that do not apply to par are listed by "
    "--help-hidden only.";

/// LLVM's libraries register code-generation options (targets, profiling,
/// debug info) that par-opt links in but never uses: hidden from --help
/// (still listed by --help-hidden). Called before MLIR registers its own
/// options, which stay visible.
static void hideLinkedOptions() {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *option = entry.second;
    if (option->getOptionHiddenFlag() != llvm::cl::NotHidden ||
        llvm::is_contained(option->Categories, &parCategory) ||
        !llvm::is_contained(option->Categories,
                            &llvm::cl::getGeneralCategory()))
      continue;
    option->setHiddenFlag(llvm::cl::Hidden);
  }
}

/// Planners that measure a partitioned copy (--auto-shard, --par-remat)
/// plan for the program --par-fuse makes when it runs later in the same
/// pipeline: their fuse=auto becomes fuse=on there (and stays auto, which
/// is off, elsewhere; an explicit on or off is kept).
static LogicalResult planForFusion(OpPassManager &pm) {
  bool fuseFollows = false;
  SmallVector<Pass *> passes;
  for (Pass &pass : pm.getPasses())
    passes.push_back(&pass);
  for (Pass *pass : llvm::reverse(passes)) {
    StringRef name = pass->getArgument();
    if (name == "par-fuse") {
      fuseFollows = true;
      continue;
    }
    if (!fuseFollows || (name != "auto-shard" && name != "par-remat"))
      continue;
    std::string text;
    llvm::raw_string_ostream os(text);
    pass->printAsTextualPipeline(os);
    if (!StringRef(text).contains("fuse=auto"))
      continue;
    if (failed(pass->initializeOptions("fuse=on", [](const Twine &message) {
          llvm::errs() << "par-opt: error: " << message << "\n";
          return failure();
        })))
      return failure();
  }
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  hideLinkedOptions();

  DialectRegistry registry;
  registry.insert<par::ParDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
  par::registerParPassesAndPipelines();
  registerCanonicalizerPass();
  registerCSEPass();
  registerInlinerPass();
  registerSymbolDCEPass();

  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, overview, registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  // Diagnostics name the op and its location; dumping the whole enclosing op
  // after each error buries the message, so it is opt-in here.
  auto &options = llvm::cl::getRegisteredOptions();
  if (auto *printOp = static_cast<llvm::cl::opt<bool> *>(
          options.lookup("mlir-print-op-on-diagnostic")))
    if (!printOp->getNumOccurrences())
      *printOp = false;

  if (config.shouldShowDialects() || config.shouldListPasses())
    return asMainReturnCode(
        MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  if (meshOption.getNumOccurrences()) {
    std::vector<par::MeshAxisSpec> axes;
    std::string error;
    if (!par::parseMeshSpec(meshOption, axes, error)) {
      llvm::errs() << argv[0] << ": error: invalid --mesh='" << meshOption
                   << "': " << error << "\n";
      return 1;
    }
    // The mesh may be what makes the input valid (shardings naming its
    // axes), so the input is verified after the mesh is set, not before.
    config.verifyOnParsing(false);
    MlirOptMainConfig base = config;
    std::string spec = meshOption;
    config.setPassPipelineSetupFn([base, spec](PassManager &pm) {
      pm.addPass(par::createSetMeshPass(par::SetMeshPassOptions{spec}));
      return base.setupPassPipeline(pm);
    });
  }

  {
    MlirOptMainConfig base = config;
    config.setPassPipelineSetupFn([base](PassManager &pm) {
      if (failed(base.setupPassPipeline(pm)))
        return failure();
      return planForFusion(pm);
    });
  }

  if (emitProgramOption.getNumOccurrences() || reportOption) {
    MlirOptMainConfig base = config;
    std::optional<std::string> file;
    if (emitProgramOption.getNumOccurrences())
      file = emitProgramOption;
    bool report = reportOption;
    config.setPassPipelineSetupFn([base, file, report](PassManager &pm) {
      if (failed(base.setupPassPipeline(pm)))
        return failure();
      pm.addPass(par::createSchedulePass());
      if (file) {
        par::EmitProgramPassOptions options;
        options.file = *file;
        pm.addPass(par::createEmitProgramPass(options));
      }
      if (report) {
        par::ReportPassOptions options;
        options.toStderr = true;
        pm.addPass(par::createReportPass(options));
      }
      return success();
    });
  }

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << argv[0] << ": error: " << errorMessage << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << argv[0] << ": error: " << errorMessage << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
