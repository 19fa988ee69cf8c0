//===- SplitStages.cpp - One function per pipeline stage ------------------===//
//
// The step's ops are put in one global order: each forward or backward op
// runs no earlier than its slot of the schedule (simulated with the FLOPs
// of each stage) and no earlier than its operands, the optimizer after
// every slot. Each stage runs its ops in that order. A value read in
// another stage is sent right after it is made and received right before
// its first reader there, so every wait (a receive, or a send's buffer
// being reused after the receive that matches it) waits only on what comes
// before it in the global order: no schedule can deadlock.
//
//===----------------------------------------------------------------------===//

#include "par/Transforms/Pipeline.h"

#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/IR/IRMapping.h"

#include <functional>
#include <limits>
#include <map>

using namespace mlir;
using namespace mlir::par;

SmallVector<func::FuncOp> mlir::par::stageFunctions(ModuleOp module,
                                                    func::FuncOp step) {
  std::map<int64_t, func::FuncOp> byStage;
  for (auto func : module.getOps<func::FuncOp>())
    if (auto of = func->getAttrOfType<StringAttr>(ParDialect::kStageOfAttrName))
      if (of.getValue() == step.getSymName())
        if (auto stage =
                func->getAttrOfType<IntegerAttr>(ParDialect::kStageAttrName))
          byStage[stage.getInt()] = func;
  SmallVector<func::FuncOp> result;
  for (auto &[stage, func] : byStage)
    result.push_back(func);
  return result;
}

SlotTimes mlir::par::stageWork(ModuleOp module, func::FuncOp step,
                               const PipelineInfo &info) {
  SlotTimes work(info.chunks());
  for (func::FuncOp stage : stageFunctions(module, step))
    stage.walk([&](Operation *op) { addSlotWork(op, info, work); });
  return work;
}

namespace {

/// A value one device sends another: from and to are devices, fromChunk
/// and toChunk the virtual stages that make and first read it.
struct Transfer {
  Value value;
  int64_t from, to;
  int64_t fromChunk, toChunk;
  int64_t channel;
};

/// An entry of the global order: an op of the step, or one side of a
/// transfer.
struct Entry {
  enum Kind { Op, Send, Recv } kind = Op;
  Operation *op = nullptr;
  size_t transfer = 0;
  int64_t stage = 0;
};

} // namespace

LogicalResult mlir::par::splitStages(func::FuncOp func) {
  std::optional<PipelineInfo> info = getPipeline(func);
  if (!info)
    return success();
  if (info->axis == "auto")
    return func.emitError()
           << "@" << func.getSymName()
           << " is pipelined with axis=auto: --auto-shard chooses the "
              "pipeline axis and places the stages; run it before "
              "--par-schedule (or name the axis)";
  // A record --par-pipeline would not have written (one edited by hand).
  StringRef schedule = info->schedule;
  if (info->stages < 1 || info->microbatches < 1 || info->virtualStages < 1 ||
      (!llvm::is_contained(pipelineSchedules(), schedule) &&
       schedule != "auto") ||
      (schedule == "interleaved") != (info->virtualStages > 1) ||
      (schedule == "interleaved" && info->microbatches % info->stages) ||
      int64_t(info->firstLayers.size()) != info->chunks())
    return func.emitError()
           << "@" << func.getSymName()
           << ": par.pipeline is not a pipeline --par-pipeline makes "
              "(stages, microbatches and virtual positive, a known "
              "schedule, virtual > 1 exactly with interleaved and then "
              "microbatches a multiple of stages, one first layer per "
              "virtual stage)";
  WalkResult staged = func.walk([&](Operation *op) {
    std::optional<int64_t> stage = getStage(op);
    if (stage && *stage >= info->chunks()) {
      op->emitError() << "par.stage = " << *stage << " but @"
                      << func.getSymName() << "'s pipeline has "
                      << info->chunks() << " (virtual) stages";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (staged.wasInterrupted())
    return failure();
  MLIRContext *ctx = func.getContext();
  Block &body = func.getBody().front();
  Operation *terminator = body.getTerminator();
  int64_t p = info->stages;
  assignStages(func, *info);
  SmallVector<int64_t> argStage = argumentStages(func);

  MeshOp mesh = findMesh(func);
  if (!mesh || mesh.getAxisIndex(info->axis) < 0)
    return func.emitError()
           << "@" << func.getSymName()
           << " runs on no mesh with its pipeline axis '" << info->axis << "'";
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());

  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  // Ops carry their virtual stage; each device runs the chunks c with
  // c mod p its position.
  auto chunkOf = [&](Operation *op) { return *getStage(op); };
  auto stageOf = [&](Operation *op) { return info->deviceOf(chunkOf(op)); };

  // Ops that the passes after --par-pipeline made without a micro-batch
  // take their producers' latest (a collective of a layer's output).
  for (Operation *op : ops) {
    if (getMicrobatch(op) || inPhase(op, Phase::optimizer))
      continue;
    std::optional<int64_t> mb;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (std::optional<int64_t> i = getMicrobatch(def))
          mb = std::max(mb.value_or(*i), *i);
    if (mb)
      setMicrobatch(op, *mb);
  }

  resolveAutoSchedule(func, *info);
  markWeightGradients(func, *info);

  // Slot times from the schedule, with each virtual stage's FLOPs per
  // micro-batch.
  SlotTimes work(info->chunks());
  for (Operation *op : ops)
    addSlotWork(op, *info, work);
  ScheduleTimes times = simulateSchedule(*info, work);
  std::map<std::tuple<int, int64_t, int64_t>, double> slotStart;
  for (int64_t s = 0; s < p; ++s)
    for (auto [slot, start] : llvm::zip(times.slots[s], times.start[s]))
      slotStart[{int(slot.kind), slot.microbatch, slot.chunk}] = start;
  constexpr double never = std::numeric_limits<double>::infinity();

  // An op's time: its slot, but no earlier than its operands; ops of no
  // micro-batch (working copies, gathers of weights) just before their
  // first reader's slot; the optimizer after every slot.
  DenseMap<Operation *, double> slotTime;
  for (Operation *op : llvm::reverse(ops)) {
    std::optional<Phase> phase = getPhase(op);
    double t = never;
    if (std::optional<PipelineSlot> slot = slotOf(op)) {
      auto it =
          slotStart.find({int(slot->kind), slot->microbatch, slot->chunk});
      if (it == slotStart.end())
        return op->emitError()
               << "--par-schedule: no slot " << slotLabel(*slot, *info)
               << " in the " << info->schedule << " schedule of @"
               << func.getSymName();
      t = it->second;
    } else if (!phase || *phase != Phase::optimizer)
      for (Operation *user : op->getUsers())
        if (user != terminator)
          t = std::min(t, slotTime.lookup(user));
    slotTime[op] = t;
  }
  DenseMap<Operation *, double> time;
  for (Operation *op : ops) {
    double t = slotTime[op];
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        t = std::max(t, time.lookup(def));
    time[op] = t;
  }
  // Ties keep the block's (topological) order.
  SmallVector<Operation *> order(ops);
  std::stable_sort(order.begin(), order.end(), [&](Operation *a, Operation *b) {
    return time[a] < time[b];
  });

  // Transfers: one per value and stage that reads it elsewhere. Constants
  // are made again where they are read instead.
  auto homeChunkOf = [&](Value value) -> int64_t {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return argStage[arg.getArgNumber()];
    return chunkOf(value.getDefiningOp());
  };
  auto homeOf = [&](Value value) { return info->deviceOf(homeChunkOf(value)); };
  // The stage each result is returned from: the one that holds the
  // argument it replaces, else the one that makes it.
  SmallVector<int64_t> resultStage;
  for (auto [j, returned] : llvm::enumerate(terminator->getOperands())) {
    std::optional<unsigned> target = getUpdatedArgument(func, unsigned(j));
    resultStage.push_back(target ? info->deviceOf(argStage[*target])
                                 : homeOf(returned));
  }
  SmallVector<Transfer> transfers;
  std::map<std::pair<void *, int64_t>, size_t> transferOf;
  // Per op, the transfers received right before it.
  DenseMap<Operation *, SmallVector<size_t>> receivedBefore;
  SmallVector<size_t> receivedAtEnd;
  std::function<void(Value, int64_t, int64_t, Operation *)> need =
      [&](Value value, int64_t stage, int64_t chunk, Operation *reader) {
        Operation *def = value.getDefiningOp();
        if (def && isa<ConstantOp>(def))
          return;
        int64_t home = homeOf(value);
        if (home == stage)
          return;
        // A broadcast is made again where it is read, from its operand.
        if (auto broadcast = dyn_cast_or_null<BroadcastOp>(def);
            broadcast && reader)
          return need(broadcast.getInput(), stage, chunk, reader);
        auto key = std::make_pair(value.getAsOpaquePointer(), stage);
        if (transferOf.count(key))
          return;
        transferOf[key] = transfers.size();
        if (reader)
          receivedBefore[reader].push_back(transfers.size());
        else
          receivedAtEnd.push_back(transfers.size());
        transfers.push_back({value, home, stage, homeChunkOf(value), chunk,
                             int64_t(transfers.size())});
      };
  for (Operation *op : order)
    for (Value operand : op->getOperands())
      need(operand, stageOf(op), chunkOf(op), op);
  for (auto [j, returned] : llvm::enumerate(terminator->getOperands()))
    need(returned, resultStage[j], resultStage[j], nullptr);

  // The global order with the transfers: a send right after what it
  // sends (at the start for an argument), a receive right before its
  // first reader.
  DenseMap<void *, SmallVector<size_t>> sentAfter;
  SmallVector<size_t> sentFirst;
  for (auto [i, t] : llvm::enumerate(transfers)) {
    if (Operation *def = t.value.getDefiningOp())
      sentAfter[def].push_back(i);
    else
      sentFirst.push_back(i);
  }
  SmallVector<Entry> entries;
  for (size_t i : sentFirst)
    entries.push_back({Entry::Send, nullptr, i, transfers[i].from});
  for (Operation *op : order) {
    for (size_t i : receivedBefore.lookup(op))
      entries.push_back({Entry::Recv, nullptr, i, transfers[i].to});
    entries.push_back({Entry::Op, op, 0, stageOf(op)});
    for (size_t i : sentAfter.lookup(op))
      entries.push_back({Entry::Send, nullptr, i, transfers[i].from});
  }
  for (size_t i : receivedAtEnd)
    entries.push_back({Entry::Recv, nullptr, i, transfers[i].to});
  SmallVector<int64_t> recvOrder(transfers.size(), 0);
  for (auto [n, entry] : llvm::enumerate(entries))
    if (entry.kind == Entry::Recv)
      recvOrder[entry.transfer] = int64_t(n);

  // The stage functions.
  OpBuilder b(ctx);
  b.setInsertionPointAfter(func);
  SmallVector<func::FuncOp> stages;
  SmallVector<IRMapping> maps(p);
  SmallVector<DenseMap<unsigned, unsigned>> localArg(p);
  for (int64_t s = 0; s < p; ++s) {
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<unsigned> args, results;
    for (BlockArgument arg : func.getArguments())
      if (info->deviceOf(argStage[arg.getArgNumber()]) == s) {
        localArg[s][arg.getArgNumber()] = args.size();
        args.push_back(arg.getArgNumber());
        argTypes.push_back(arg.getType());
      }
    for (auto [j, returned] : llvm::enumerate(terminator->getOperands()))
      if (resultStage[j] == s) {
        results.push_back(unsigned(j));
        resultTypes.push_back(returned.getType());
      }
    auto stage = func::FuncOp::create(
        b, func.getLoc(), (func.getSymName() + ".stage" + Twine(s)).str(),
        FunctionType::get(ctx, argTypes, resultTypes));
    b.setInsertionPointAfter(stage);
    for (NamedAttribute attr : func->getAttrs())
      if (attr.getName() != func.getSymNameAttrName() &&
          attr.getName() != func.getFunctionTypeAttrName() &&
          attr.getName() != func.getArgAttrsAttrName() &&
          attr.getName() != func.getResAttrsAttrName() &&
          attr.getName() != func.getSymVisibilityAttrName())
        stage->setAttr(attr.getName(), attr.getValue());
    stage->setAttr(ParDialect::kStageOfAttrName, func.getSymNameAttr());
    stage->setAttr(ParDialect::kStageAttrName, b.getI64IntegerAttr(s));
    // Each argument's and result's attributes set at once (setting them one
    // by one rebuilds the list of every argument's each time).
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    for (unsigned arg : args) {
      NamedAttrList attrs(func.getArgAttrDict(arg));
      attrs.set(ParDialect::kInputAttrName, b.getI64IntegerAttr(arg));
      argAttrs.push_back(attrs.getDictionary(ctx));
    }
    for (unsigned j : results) {
      NamedAttrList attrs(func.getResultAttrDict(j));
      if (auto target = llvm::dyn_cast_if_present<IntegerAttr>(
              attrs.get(ParDialect::kUpdatesAttrName)))
        attrs.set(
            ParDialect::kUpdatesAttrName,
            b.getI64IntegerAttr(localArg[s].lookup(unsigned(target.getInt()))));
      attrs.set(ParDialect::kOutputAttrName, b.getI64IntegerAttr(j));
      resultAttrs.push_back(attrs.getDictionary(ctx));
    }
    stage.setAllArgAttrs(argAttrs);
    stage.setAllResultAttrs(resultAttrs);
    Block *entry = stage.addEntryBlock();
    for (auto [i, arg] : llvm::enumerate(args))
      maps[s].map(func.getArgument(arg), entry->getArgument(i));
    stages.push_back(stage);
  }

  // Marks that name arguments name the stage's own.
  auto remapMarks = [&](Operation *copy, int64_t s) {
    SmallVector<int64_t> gradientOf = getGradientOf(copy);
    if (!gradientOf.empty()) {
      copy->removeAttr(ParDialect::kGradientOfAttrName);
      for (int64_t param : gradientOf)
        if (localArg[s].count(unsigned(param)))
          addGradientOf(copy, localArg[s].lookup(unsigned(param)));
    }
    for (StringRef name :
         {ParDialect::kCopyOfAttrName, ParDialect::kViewOfAttrName}) {
      auto master = copy->getAttrOfType<IntegerAttr>(name);
      if (!master)
        continue;
      if (localArg[s].count(unsigned(master.getInt())))
        copy->setAttr(name, b.getI64IntegerAttr(
                                localArg[s].lookup(unsigned(master.getInt()))));
      else
        copy->removeAttr(name);
    }
  };
  // Constants and broadcasts another stage reads are made there too, in
  // the virtual stage of their reader.
  std::function<void(Value, int64_t, int64_t)> makeAgain =
      [&](Value value, int64_t s, int64_t chunk) {
        Operation *def = value.getDefiningOp();
        if (!def || !isa<ConstantOp, BroadcastOp>(def) || stageOf(def) == s ||
            maps[s].contains(value))
          return;
        for (Value operand : def->getOperands())
          makeAgain(operand, s, chunk);
        Operation *copy = b.clone(*def, maps[s]);
        remapMarks(copy, s);
        setStage(copy, chunk);
      };
  StringAttr axis = b.getStringAttr(info->axis);
  for (auto [n, entry] : llvm::enumerate(entries)) {
    int64_t s = entry.stage;
    b.setInsertionPointToEnd(&stages[s].getBody().front());
    Operation *made = nullptr;
    if (entry.kind == Entry::Op) {
      for (Value operand : entry.op->getOperands())
        makeAgain(operand, s, chunkOf(entry.op));
      made = b.clone(*entry.op, maps[s]);
      remapMarks(made, s);
    } else {
      const Transfer &t = transfers[entry.transfer];
      if (entry.kind == Entry::Send) {
        made = SendOp::create(b, t.value.getLoc(), maps[s].lookup(t.value),
                              meshRef, axis, b.getI64IntegerAttr(t.to),
                              b.getI64IntegerAttr(t.channel));
        made->setAttr(ParDialect::kMatchedAttrName,
                      b.getI64IntegerAttr(recvOrder[entry.transfer]));
      } else {
        auto recv = RecvOp::create(b, t.value.getLoc(), t.value.getType(),
                                   meshRef, axis, b.getI64IntegerAttr(t.from),
                                   b.getI64IntegerAttr(t.channel));
        maps[s].map(t.value, recv.getResult());
        made = recv;
      }
      // A transfer belongs to the slot of what it moves, in the virtual
      // stage that sends or first reads it.
      int64_t chunk = entry.kind == Entry::Send ? t.fromChunk : t.toChunk;
      if (Operation *def = t.value.getDefiningOp()) {
        StepMarks{getPhase(def), getLayer(def), chunk, getMicrobatch(def)}
            .stamp(made);
        if (def->hasAttr(ParDialect::kWeightGradientAttrName))
          made->setAttr(ParDialect::kWeightGradientAttrName, b.getUnitAttr());
      } else {
        setStage(made, chunk);
      }
    }
    made->setAttr(ParDialect::kOrderAttrName, b.getI64IntegerAttr(int64_t(n)));
  }
  for (int64_t s = 0; s < p; ++s) {
    SmallVector<Value> returned;
    for (auto [j, value] : llvm::enumerate(terminator->getOperands()))
      if (resultStage[j] == s) {
        if (auto constant = value.getDefiningOp<ConstantOp>())
          if (!maps[s].contains(value)) {
            b.setInsertionPointToEnd(&stages[s].getBody().front());
            b.clone(*constant, maps[s]);
          }
        returned.push_back(maps[s].lookup(value));
      }
    b.setInsertionPointToEnd(&stages[s].getBody().front());
    func::ReturnOp::create(b, terminator->getLoc(), returned);
  }

  // The step keeps its signature as a declaration.
  func.getBody().getBlocks().clear();
  func.setPrivate();
  return success();
}
