//===- Passes.h - par passes ------------------------------------*- C++ -*-===//
#ifndef PAR_TRANSFORMS_PASSES_H
#define PAR_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "par/Dialect/Par/IR/ParOps.h"

namespace mlir::par {

/// --par-autodiff's optimizer= and precision= options.
enum class OptimizerKind { none, sgd, adamw };
enum class Precision { fp32, bf16, fp16 };

/// The names of an option enum's values, in enum order.
template <typename E> struct OptionNames;
template <> struct OptionNames<OptimizerKind> {
  static constexpr const char *names[] = {"none", "sgd", "adamw"};
};
template <> struct OptionNames<Precision> {
  static constexpr const char *names[] = {"fp32", "bf16", "fp16"};
};

} // namespace mlir::par

namespace llvm::cl {
/// Parses a pass option of an enum with OptionNames; a wrong value is an
/// error that lists the right ones.
template <typename E> class NamedEnumParser : public basic_parser<E> {
public:
  using basic_parser<E>::basic_parser;
  bool parse(Option &option, StringRef, StringRef arg, E &value) {
    std::string list;
    for (auto [i, name] : llvm::enumerate(mlir::par::OptionNames<E>::names)) {
      if (arg == name) {
        value = E(i);
        return false;
      }
      list += std::string(list.empty() ? "" : ", ") + name;
    }
    return option.error("must be one of " + list + ", got '" + arg + "'");
  }
  StringRef getValueName() const override { return "value"; }
  static void print(raw_ostream &os, const E &value) {
    os << mlir::par::OptionNames<E>::names[size_t(value)];
  }
  void printOptionDiff(const Option &option, E value, OptionValue<E> initial,
                       size_t width) const {
    this->printOptionName(option, width);
    outs() << "= " << mlir::par::OptionNames<E>::names[size_t(value)] << "\n";
  }
};
template <>
class parser<mlir::par::OptimizerKind>
    : public NamedEnumParser<mlir::par::OptimizerKind> {
public:
  using NamedEnumParser::NamedEnumParser;
};
template <>
class parser<mlir::par::Precision>
    : public NamedEnumParser<mlir::par::Precision> {
public:
  using NamedEnumParser::NamedEnumParser;
};
} // namespace llvm::cl

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Transforms/Passes.h.inc"

/// Options of the --par-partition pipeline.
struct PartitionPipelineOptions
    : public PassPipelineOptions<PartitionPipelineOptions> {
  Option<bool> zero{*this, "zero",
                    llvm::cl::desc("Apply the ZeRO stage a training step is "
                                   "marked with (--par-zero) first"),
                    llvm::cl::init(true)};
  Option<bool> sinkPartials{
      *this, "sink-partials",
      llvm::cl::desc("Resolve partial sums after the linear ops that follow "
                     "them (--par-sink-partials)"),
      llvm::cl::init(true)};
  Option<bool> combineCollectives{
      *this, "combine-collectives",
      llvm::cl::desc("Issue independent small all-reduces on one group as "
                     "one (--par-combine-collectives)"),
      llvm::cl::init(true)};
  Option<bool> diagnose{
      *this, "diagnose",
      llvm::cl::desc("Report what propagating ZeRO's layouts meets (off for "
                     "copies whose diagnostics are discarded)"),
      llvm::cl::init(true)};
};

/// --par-partition: a sharded global program into one per-device program:
/// [--par-zero,] --par-split-checkpoints, --par-insert-reshards,
/// [--par-sink-partials,]
/// --par-to-local[, --par-combine-collectives].
void buildPartitionPipeline(OpPassManager &pm,
                            const PartitionPipelineOptions &options);

/// A copy of `module` as --par-propagate --par-partition --par-schedule
/// leave it (the pipeline's default options), for a planner to measure a
/// candidate exactly (--auto-shard, --par-remat=auto). Not verified between
/// passes: the pipeline verifies when it runs on the module itself. On
/// failure, `error` holds the first error reported. Without `schedule`,
/// --par-schedule is left out: nothing before it reads a pipeline's
/// schedule, so one such copy serves every schedule of the same stages
/// (scheduledCopy). With `fuse`, --par-fuse runs after partitioning (the
/// copy is then the program a pipeline ending in --par-fuse emits).
FailureOr<OwningOpRef<ModuleOp>> partitionedCopy(ModuleOp module,
                                                 std::string &error,
                                                 bool schedule = true,
                                                 bool fuse = false);
/// The same on a module the caller has already copied.
FailureOr<OwningOpRef<ModuleOp>> partitionedCopy(OwningOpRef<ModuleOp> copy,
                                                 std::string &error,
                                                 bool schedule = true,
                                                 bool fuse = false);
/// A copy of `partitioned` (from partitionedCopy without `schedule`) with
/// the pipelined functions named in `functions` given `schedule` (same
/// stages; other functions keep theirs), then --par-schedule run.
FailureOr<OwningOpRef<ModuleOp>> scheduledCopy(ModuleOp partitioned,
                                               ArrayRef<std::string> functions,
                                               StringRef schedule,
                                               std::string &error);

/// Registers the par passes and pipelines with the command line.
void registerParPassesAndPipelines();

} // namespace mlir::par

#endif // PAR_TRANSFORMS_PASSES_H
