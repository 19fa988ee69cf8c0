//===- Executor.cpp - Runs one rank's instruction stream ------------------===//

#include "par/Runtime/Executor.h"

#include "par/Runtime/Comm/GroupOps.h"
#include "par/Runtime/Rng.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

namespace par::rt {

/// Bytes past the arena that must stay untouched: a kernel writing past its
/// buffer shows up in measuredPeak instead of corrupting the heap.
static constexpr int64_t kGuardBytes = 4096;
static constexpr unsigned char kCanary = 0xA5;

Executor::Executor(const Program &program, Device &device, Collectives &comm,
                   Tracer *tracer)
    : program_(program), device_(device), comm_(comm),
      kernels_(device.kernels()), tracer_(tracer), rank_(comm.worldRank()),
      class_(&program.classOf(comm.worldRank())) {
  for (size_t i = 0; i < class_->instructions.size(); ++i) {
    const Instruction &inst = class_->instructions[i];
    bool group = catalogue::spec(inst.op).usesGroup;
    // Point-to-point transfers are the executor's own (transfer()).
    if (inst.op == OpCode::Send || inst.op == OpCode::Recv)
      continue;
    if (group ? !groupOps().lookup(inst.op) : !kernels_.lookup(inst.op))
      throw RunError(
          program.path + ": instruction " + std::to_string(i) + " (" +
          opName(inst.op) + (inst.loc.empty() ? "" : " at " + inst.loc) +
          "): " +
          (group ? std::string("this runtime cannot run it over a group")
                 : "the " + std::string(kernels_.backend) +
                       " backend has no kernel for it"));
  }
  timed_ = program.pipeline.has_value();
  if (timed_)
    timing_.seconds.assign(class_->instructions.size(),
                           std::numeric_limits<double>::infinity());
  allocated_ = class_->arenaBytes + kGuardBytes;
  size_t alignment = size_t(std::max<int64_t>(program.alignment, 64));
  try {
    arena_ =
        static_cast<char *>(device_.allocate(size_t(allocated_), alignment));
  } catch (const DeviceError &e) {
    throw RunError("rank " + std::to_string(rank_) + ": cannot allocate the " +
                   std::to_string(class_->arenaBytes) +
                   "-byte arena: " + e.what());
  }
  try {
    device_.fill(arena_, kCanary, size_t(allocated_));
    reserveScratch();
  } catch (...) {
    device_.release(arena_);
    throw;
  }
}

void Executor::reserveScratch() {
  for (const Instruction &inst : class_->instructions) {
    if (inst.op == OpCode::Send || inst.op == OpCode::Recv)
      continue;
    std::vector<Tensor> in, out;
    for (int64_t id : inst.operands)
      in.push_back(buffer(id));
    for (int64_t id : inst.results)
      out.push_back(buffer(id));
    if (catalogue::spec(inst.op).usesGroup) {
      if (!in.empty() && !out.empty())
        commScratch_ = std::max<int64_t>(
            commScratch_,
            int64_t(comm_.scratchBytes(inst.op, inst.attrs, in[0], out[0])));
      continue;
    }
    kernelScratch_ = std::max<int64_t>(
        kernelScratch_,
        int64_t(kernels_.scratchBytes(inst.op, inst.attrs, in, out)));
  }
  auto need = [&](const char *what, int64_t bytes) {
    return "rank " + std::to_string(rank_) + ": cannot set aside " +
           std::to_string(bytes) + " bytes of " + what + " next to the " +
           std::to_string(class_->arenaBytes) + "-byte arena (" +
           std::to_string(class_->arenaBytes + kernelScratch_ + commScratch_) +
           " bytes in all): ";
  };
  try {
    // Set aside even when nothing is needed: a launch that then asks for
    // scratch shows a size function missing.
    if (kernels_.reserveScratch)
      kernels_.reserveScratch(size_t(kernelScratch_));
  } catch (const std::exception &e) {
    throw RunError(need("kernel scratch", kernelScratch_) + e.what());
  }
  try {
    comm_.reserveScratch(size_t(commScratch_));
  } catch (const std::exception &e) {
    throw RunError(need("collective scratch", commScratch_) + e.what());
  }
}

Executor::~Executor() { device_.release(arena_); }

Tensor Executor::buffer(int64_t id) const {
  const Buffer &b = class_->buffers[size_t(id)];
  return Tensor{b.dtype, b.shape, arena_ + b.offset};
}

Tensor Executor::input(size_t i) const {
  int64_t id = class_->inputBuffers.at(i);
  if (id < 0)
    throw RunError("rank " + std::to_string(rank_) +
                   " holds no part of input '" + program_.inputs[i].name + "'");
  return buffer(id);
}

Tensor Executor::output(size_t i) const {
  int64_t id = class_->outputBuffers.at(i);
  if (id < 0)
    throw RunError("rank " + std::to_string(rank_) +
                   " holds no part of output '" + program_.outputs[i].name +
                   "'");
  return buffer(id);
}

/// Copies between a row-major block of shape `box` and the same box at the
/// start of a padded buffer of shape `buffer`, in the direction `toBuffer`.
static void copyBox(const Shape &box, const Shape &buffer, size_t elementBytes,
                    const char *from, char *to, bool toBuffer) {
  Shape origin(box.size(), 0);
  forEachInSlice(box, origin, box, buffer, [&](int64_t padded, int64_t dense) {
    size_t src = size_t(toBuffer ? dense : padded) * elementBytes;
    size_t dst = size_t(toBuffer ? padded : dense) * elementBytes;
    std::memcpy(to + dst, from + src, elementBytes);
  });
}

/// The real part of a flat view's piece `local` (a range of the flat
/// tensor) as boxes of the view: the padding past the view is left out.
static std::vector<FlatBox> viewBoxes(const InputSpec &spec,
                                      const Slice &local) {
  int64_t begin = local.offsets[0];
  return flatRangeBoxes(
      *spec.view, begin,
      std::min(begin + local.shape[0], numElements(*spec.view)));
}

void Executor::initParams(uint64_t seed) {
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const InputSpec &spec = program_.inputs[i];
    if (spec.role != InputRole::Param || class_->inputBuffers[i] < 0)
      continue;
    Tensor t = input(i);
    Shape offsets, local;
    localSlice(program_, spec.globalShape, spec.sharding, rank_, offsets,
               local);
    uint64_t stream = streamOf(spec.name);
    const InitSpec &init = spec.init;
    std::vector<char> host(t.bytes(), 0); // padding starts as zeros
    // A flat view's elements past the view are padding too.
    int64_t real = numElements(spec.savedShape());
    forEachInSlice(
        spec.globalShape, offsets, local, t.shape, [&](int64_t l, int64_t g) {
          double value = 0;
          if (g >= real)
            return;
          switch (init.kind) {
          case InitSpec::Normal:
            value = init.a * randomNormal(seed, stream, uint64_t(g));
            break;
          case InitSpec::Uniform:
            value = init.a + (init.b - init.a) *
                                 randomUniform(seed, stream, uint64_t(g));
            break;
          case InitSpec::Zeros:
            value = 0;
            break;
          case InitSpec::Ones:
            value = 1;
            break;
          case InitSpec::Constant:
            value = init.a;
            break;
          }
          storeElement(t.dtype, host.data(), l, value);
        });
    device_.copyTensorIn(t, host);
  }
}

void Executor::feedData(const DataSource &data, uint64_t seed, int64_t step) {
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const InputSpec &spec = program_.inputs[i];
    if (spec.role != InputRole::Data || class_->inputBuffers[i] < 0)
      continue;
    Tensor t = input(i);
    Shape offsets, local;
    localSlice(program_, spec.globalShape, spec.sharding, rank_, offsets,
               local);
    std::vector<char> host(t.bytes(), 0); // padding: token 0, value 0
    if (spec.data == DataKind::Random) {
      uint64_t stream =
          streamOf(spec.name) ^ uint64_t(step) * 0x9e3779b97f4a7c15ULL;
      forEachInSlice(spec.globalShape, offsets, local, t.shape,
                     [&](int64_t l, int64_t g) {
                       storeElement(t.dtype, host.data(), l,
                                    randomNormal(seed, stream, uint64_t(g)));
                     });
      device_.copyTensorIn(t, host);
      continue;
    }
    // Row r of step s reads the window that starts at ((s-1) * rows + r) * S;
    // targets are the same windows shifted by one token.
    int64_t rowLength = spec.globalShape.back();
    int64_t rows =
        numElements(spec.globalShape) / std::max<int64_t>(rowLength, 1);
    int64_t shift = spec.data == DataKind::Targets ? 1 : 0;
    forEachInSlice(
        spec.globalShape, offsets, local, t.shape, [&](int64_t l, int64_t g) {
          int64_t position = ((step - 1) * rows) * rowLength + g + shift;
          storeElement(t.dtype, host.data(), l,
                       double(data.token(seed, position, spec.vocab)));
        });
    device_.copyTensorIn(t, host);
  }
}

std::string Executor::where(size_t index) const {
  const Instruction &inst = class_->instructions[index];
  std::string text = "rank " + std::to_string(rank_) + ", step " +
                     std::to_string(step_) + ", instruction " +
                     std::to_string(index) + " (" + opName(inst.op);
  if (!inst.loc.empty())
    text += " at " + inst.loc;
  return text + ")";
}

void Executor::runStep(int64_t step) {
  step_ = step;
  comm_.context.step = step;
  traffic_ = Traffic{};
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  // A pipelined program's first step is left out of its timing (first
  // touches of the arena), unless it is the only one.
  bool timing = timed_;
  if (timed_ && ++stepsRun_ == 2) {
    std::fill(timing_.seconds.begin(), timing_.seconds.end(),
              std::numeric_limits<double>::infinity());
    timing_.wall = timing_.busy = 0;
    timing_.steps = 0;
  }
  Clock::time_point stepStart = Clock::now();
  double busy = 0;
  // The slot being run and when it started, for the trace.
  std::string slot;
  double slotStart = 0, slotEnd = 0;
  auto closeSlot = [&] {
    if (tracer_ && !slot.empty())
      tracer_->record(slot, Tracer::Schedule, slotStart, slotEnd, step);
    slot.clear();
  };
  for (size_t i = 0; i < class_->instructions.size(); ++i) {
    const Instruction &inst = class_->instructions[i];
    // A batch writes its last member's results now: sends whose memory
    // any member reuses must be done.
    completeSends(i + size_t(inst.batch) - 1);
    double start = tracer_ ? tracer_->now() : 0;
    Clock::time_point begin = timing ? Clock::now() : Clock::time_point();
    try {
      if (inst.batch > 1)
        executeBatch(i);
      else
        execute(inst, i);
    } catch (const KernelError &e) {
      throw RunError(where(i) + ": " + e.what());
    }
    if (timing) {
      double took = seconds(begin, Clock::now());
      timing_.seconds[i] = std::min(timing_.seconds[i], took);
      // A batch's time is its first instruction's.
      for (int64_t j = 1; j < inst.batch; ++j)
        timing_.seconds[i + size_t(j)] = 0;
      if (inst.op != OpCode::Send && inst.op != OpCode::Recv)
        busy += took;
    }
    if (tracer_) {
      // On a device that runs kernels asynchronously (CUDA), an
      // instruction's span ends when its work does: the trace serializes
      // the streams, so it times each instruction instead of its launch.
      if (device_.memorySpace() == MemorySpace::Device)
        device_.synchronize();
      double end = tracer_->now();
      tracer_->record(opName(inst.op),
                      isCollective(inst.op) ? Tracer::Communication
                                            : Tracer::Compute,
                      start, end, step, inst.loc);
      // An instruction of no slot (a weight's working copy) neither ends
      // nor extends the slot around it.
      if (!inst.slot.empty()) {
        if (inst.slot != slot) {
          closeSlot();
          slot = inst.slot;
          slotStart = start;
        }
        slotEnd = end;
      }
    }
    i += size_t(inst.batch - 1);
  }
  closeSlot();
  completeSends(class_->instructions.size());
  if (timing) {
    double n = double(timing_.steps);
    timing_.wall = (timing_.wall * n + seconds(stepStart, Clock::now())) /
                   (n + 1);
    timing_.busy = (timing_.busy * n + busy) / (n + 1);
    ++timing_.steps;
  }
  comm_.context = CommContext{step, -1, ""};
  for (size_t i = 0; i < program_.outputs.size(); ++i) {
    int64_t target = program_.outputs[i].updates;
    if (target < 0 || class_->outputBuffers[i] < 0)
      continue;
    Tensor from = output(i), to = input(size_t(target));
    device_.copy(to.data, from.data, from.bytes());
  }
  device_.synchronize();
}

void Executor::countTraffic(const Instruction &inst,
                            const std::vector<Tensor> &inputs,
                            const Tensor &out) {
  const Tensor &in = inputs[0];
  const Tensor &larger = in.bytes() >= out.bytes() ? in : out;
  int64_t n = comm_.memberCount(inst.attrs.group);
  // A permute whose members all keep their value moves nothing.
  bool moves = inst.op != OpCode::CollectivePermute;
  for (const auto &[from, to] : inst.attrs.pairs)
    moves |= from != to;
  catalogue::Traffic t =
      catalogue::collectiveTraffic(catalogue::spec(inst.op), n, moves);
  if (inst.op == OpCode::Exchange) {
    // What the busiest member sends or receives, as the compiler states it;
    // one whose pieces are all local is a copy, not a collective.
    std::vector<Shape> shapes;
    for (const Tensor &t : inputs)
      shapes.push_back(t.shape);
    int64_t moved = exchangePlan(comm_.memberShape(inst.attrs.group), shapes,
                                 out.shape, inst.attrs)
                        .busiest;
    if (moved == 0)
      return;
    traffic_.collectives += 1;
    traffic_.movedElements += moved;
    traffic_.sentBytes += moved * int64_t(dtypeBytes(in.dtype));
    return;
  }
  if (!moves)
    return;
  traffic_.collectives += 1;
  traffic_.movedElements += int64_t(t.moved) * larger.size();
  traffic_.sentBytes += int64_t(t.share * double(larger.bytes()) + 0.5);
}

void Executor::completeSends(size_t index) {
  for (size_t k = 0; k < sends_.size();) {
    if (sends_[k].lastUse >= int64_t(index)) {
      ++k;
      continue;
    }
    comm_.context = CommContext{step_, int64_t(index), sends_[k].what};
    sends_[k].transfer->wait();
    sends_.erase(sends_.begin() + std::ptrdiff_t(k));
  }
}

void Executor::transfer(const Instruction &inst, size_t index) {
  const Attrs &a = inst.attrs;
  bool sending = inst.op == OpCode::Send;
  const std::string &axis = program_.groups[size_t(a.group)].at(0);
  std::vector<int64_t> coords = meshCoords(program_, rank_);
  int64_t stage = coords[size_t(program_.axisIndex(axis))];
  coords[size_t(program_.axisIndex(axis))] = sending ? a.to : a.from;
  int64_t peer = rankAt(program_, coords);
  std::string what = std::string(sending ? "send to" : "receive from") +
                     " rank " + std::to_string(peer) + " (stage " +
                     std::to_string(sending ? a.to : a.from) + " on '" + axis +
                     "', from stage " + std::to_string(stage) +
                     (inst.slot.empty() ? "" : ", slot " + inst.slot) +
                     ", channel " + std::to_string(a.channel) +
                     ", instruction " +
                     std::to_string(index) +
                     (inst.loc.empty() ? "" : " at " + inst.loc) + ")";
  if (sending) {
    Tensor input = buffer(inst.operands[0]);
    traffic_.movedElements += input.size();
    traffic_.sentBytes += input.bytes();
    sends_.push_back({comm_.send(peer, a.channel, input),
                      class_->buffers[size_t(inst.operands[0])].lastUse,
                      what});
    return;
  }
  Tensor out = buffer(inst.results[0]);
  comm_.context = CommContext{step_, int64_t(index), what};
  comm_.recv(peer, a.channel, out)->wait();
}

void Executor::execute(const Instruction &inst, size_t index) {
  if (inst.op == OpCode::Send || inst.op == OpCode::Recv) {
    transfer(inst, index);
    return;
  }
  std::vector<Tensor> in;
  for (int64_t id : inst.operands)
    in.push_back(buffer(id));
  std::vector<Tensor> out;
  for (int64_t id : inst.results)
    out.push_back(buffer(id));
  const OpSpec &spec = catalogue::spec(inst.op);
  if (!spec.usesGroup) {
    device_.launch(inst.op, inst.attrs, in, out);
    return;
  }
  runGroupOp(inst, index, in, out[0]);
}

void Executor::executeBatch(size_t index) {
  const Instruction &first = class_->instructions[index];
  std::vector<BatchMember> members(size_t(first.batch));
  for (size_t k = 0; k < members.size(); ++k) {
    const Instruction &inst = class_->instructions[index + k];
    members[k].attrs = &inst.attrs;
    for (int64_t id : inst.operands)
      members[k].in.push_back(buffer(id));
    for (int64_t id : inst.results)
      members[k].out.push_back(buffer(id));
  }
  try {
    device_.launchBatch(first.op, members);
  } catch (const KernelError &e) {
    throw KernelError(std::string("in the batch of ") +
                      std::to_string(first.batch) + " " + opName(first.op) +
                      " instructions from this one: " + e.what());
  }
}

void Executor::runGroupOp(const Instruction &inst, size_t index,
                          const std::vector<Tensor> &inputs, Tensor &result) {
  const Attrs &a = inst.attrs;
  const OpSpec &spec = catalogue::spec(inst.op);
  if (spec.collective)
    countTraffic(inst, inputs, result);
  if (spec.communicates) {
    std::string axes;
    for (const std::string &axis : program_.groups[size_t(a.group)])
      axes += (axes.empty() ? "" : ", ") + axis;
    comm_.context =
        CommContext{step_, int64_t(index),
                    std::string(opName(inst.op)) + " over [" + axes +
                        "] (instruction " + std::to_string(index) +
                        (inst.loc.empty() ? "" : " at " + inst.loc) + ")"};
  }
  groupOps().lookup(inst.op)(comm_, device_, a, inputs, result);
}

int64_t Executor::measuredPeak() const {
  int64_t last =
      allocated_ -
      int64_t(device_.trailingBytesEqual(arena_, size_t(allocated_), kCanary));
  int64_t alignment = program_.alignment;
  return (last + alignment - 1) / alignment * alignment;
}

/// Per rank, whether it holds the first replica of its slice of a tensor
/// sharded as `sharding`: the lowest rank that holds the tensor (`holds`;
/// pipeline stages hold only their own inputs and outputs) among those with
/// its coordinates on the axes the tensor uses (partial axes count as used
/// when each partial contribution matters).
static std::vector<bool> firstReplicas(const Program &program,
                                       const ShardingSpec &sharding,
                                       bool partialIsUsed,
                                       const std::vector<bool> &holds) {
  auto uses = [&](const std::vector<std::string> &axes,
                  const std::string &axis) {
    return std::find(axes.begin(), axes.end(), axis) != axes.end();
  };
  std::vector<bool> used(program.mesh.size(), false);
  for (size_t a = 0; a < program.mesh.size(); ++a) {
    const std::string &axis = program.mesh[a].name;
    for (const auto &dim : sharding.dims)
      used[a] = used[a] || uses(dim, axis);
    used[a] = used[a] || (partialIsUsed && uses(sharding.partial, axis));
  }
  std::vector<bool> first(size_t(program.numRanks), false);
  std::set<std::vector<int64_t>> seen;
  for (int64_t r = 0; r < program.numRanks; ++r) {
    if (!holds[size_t(r)])
      continue;
    std::vector<int64_t> piece = meshCoords(program, r);
    for (size_t a = 0; a < piece.size(); ++a)
      if (!used[a])
        piece[a] = 0;
    first[size_t(r)] = seen.insert(piece).second;
  }
  return first;
}

/// Per rank, whether its class holds input `i` (or output `i`).
static std::vector<bool> holders(const Program &program, size_t i,
                                 bool output) {
  std::vector<bool> holds(size_t(program.numRanks), false);
  for (const RankClass &c : program.rankClasses)
    for (int64_t r : c.ranks)
      holds[size_t(r)] = (output ? c.outputBuffers : c.inputBuffers)[i] >= 0;
  return holds;
}

std::vector<double> Executor::gatherOutput(size_t i) {
  const OutputSpec &spec = program_.outputs[i];
  std::vector<char> local;
  if (class_->outputBuffers[i] >= 0)
    local = device_.copyTensorOut(output(i));
  std::string bytes(local.begin(), local.end());
  std::vector<std::string> all = comm_.gatherToRoot(bytes);
  if (all.empty())
    return {};
  std::vector<double> global(size_t(numElements(spec.globalShape)), 0.0);
  bool partial = !spec.sharding.partial.empty();
  Shape buffer = localBufferShape(program_, spec.globalShape, spec.sharding);
  // One copy of each replica, every partial contribution.
  std::vector<bool> first = firstReplicas(program_, spec.sharding,
                                          /*partialIsUsed=*/true,
                                          holders(program_, i, true));
  for (int64_t r = 0; r < program_.numRanks; ++r) {
    if (!first[size_t(r)])
      continue;
    Shape offsets, shape;
    localSlice(program_, spec.globalShape, spec.sharding, r, offsets, shape);
    const std::string &data = all[size_t(r)];
    forEachInSlice(
        spec.globalShape, offsets, shape, buffer, [&](int64_t l, int64_t g) {
          double value = loadElement(spec.dtype, data.data(), l);
          global[size_t(g)] = partial ? global[size_t(g)] + value : value;
        });
  }
  global.resize(size_t(numElements(spec.savedShape()))); // a view's padding
  return global;
}

std::vector<ShardData> Executor::paramShards() const {
  std::vector<ShardData> shards;
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const InputSpec &spec = program_.inputs[i];
    if (spec.role != InputRole::Param || class_->inputBuffers[i] < 0 ||
        !firstReplicas(program_, spec.sharding, false,
                       holders(program_, i, false))[size_t(rank_)])
      continue;
    ShardData shard;
    shard.name = spec.name;
    shard.dtype = spec.dtype;
    shard.globalShape = spec.globalShape;
    localSlice(program_, spec.globalShape, spec.sharding, rank_,
               shard.slice.offsets, shard.slice.shape);
    if (numElements(shard.slice.shape) == 0)
      continue; // all padding
    Tensor t = input(i);
    auto host = std::make_shared<std::vector<char>>(device_.copyTensorOut(t));
    shard.data = host->data();
    shard.storage = host;
    if (spec.view) {
      // A flat view's piece, a contiguous range, saved as boxes of the view
      // (the padding at its end is not saved).
      for (const FlatBox &box : viewBoxes(spec, shard.slice)) {
        ShardData part = shard;
        part.globalShape = *spec.view;
        part.slice = box.slice;
        part.data = host->data() + size_t(box.begin - shard.slice.offsets[0]) *
                                       dtypeBytes(t.dtype);
        shards.push_back(part);
      }
      continue;
    }
    if (shard.slice.shape != t.shape) {
      // Only the real elements of a padded buffer are saved.
      auto compact = std::make_shared<std::vector<char>>(
          size_t(numElements(shard.slice.shape)) * dtypeBytes(t.dtype));
      copyBox(shard.slice.shape, t.shape, dtypeBytes(t.dtype), host->data(),
              compact->data(), false);
      shard.data = compact->data();
      shard.storage = compact;
    }
    shards.push_back(shard);
  }
  return shards;
}

std::map<std::string, TensorRecord> Executor::checkpointRecords() const {
  std::map<std::string, TensorRecord> records;
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const InputSpec &spec = program_.inputs[i];
    if (spec.role != InputRole::Param)
      continue;
    TensorRecord &record = records[spec.name];
    record.dtype = spec.dtype;
    record.globalShape = spec.savedShape();
    std::vector<bool> first = firstReplicas(program_, spec.sharding, false,
                                            holders(program_, i, false));
    for (int64_t r = 0; r < program_.numRanks; ++r) {
      if (!first[size_t(r)])
        continue;
      Slice local;
      localSlice(program_, spec.globalShape, spec.sharding, r, local.offsets,
                 local.shape);
      if (numElements(local.shape) == 0)
        continue;
      std::vector<Slice> slices{local};
      if (spec.view) {
        // As paramShards saves a flat view's piece: boxes of the view.
        slices.clear();
        for (const FlatBox &box : viewBoxes(spec, local))
          slices.push_back(box.slice);
      }
      for (const Slice &slice : slices) {
        ShardRecord shard;
        shard.slice = slice;
        shard.file = shardFileName(int(r));
        shard.key = shardKey(spec.name, shard.slice);
        record.shards.push_back(shard);
      }
    }
  }
  return records;
}

/// True when a real (unpadded) element of `t`, this rank's part of a
/// tensor of `globalShape` split as `sharding`, is a NaN or an infinity.
static bool holdsNonFinite(const Program &program, Device &device,
                           const Tensor &t, const Shape &globalShape,
                           const ShardingSpec &sharding, int64_t rank) {
  if (!isFloat(t.dtype))
    return false;
  Shape offsets, local;
  localSlice(program, globalShape, sharding, rank, offsets, local);
  // Host memory is read where it is (every step checks every output:
  // copying the parameters out first doubled the check's cost).
  std::vector<char> copied;
  const void *data = t.data;
  if (device.memorySpace() != MemorySpace::Host) {
    copied = device.copyTensorOut(t);
    data = copied.data();
  } else {
    device.synchronize();
  }
  if (local == t.shape) // no padding: one pass over the bits
    return firstNonFinite(t.dtype, data, numElements(local)) >= 0;
  bool bad = false;
  forEachInSlice(globalShape, offsets, local, t.shape, [&](int64_t l, int64_t) {
    bad = bad || !std::isfinite(loadElement(t.dtype, data, l));
  });
  return bad;
}

bool Executor::inputNonFinite(size_t i) const {
  const InputSpec &spec = program_.inputs[i];
  if (class_->inputBuffers[i] < 0)
    return false;
  return holdsNonFinite(program_, device_, input(i), spec.globalShape,
                        spec.sharding, rank_);
}

bool Executor::outputNonFinite(size_t i) const {
  const OutputSpec &spec = program_.outputs[i];
  if (class_->outputBuffers[i] < 0)
    return false;
  return holdsNonFinite(program_, device_, output(i), spec.globalShape,
                        spec.sharding, rank_);
}

/// The value of a 0-d tensor in device memory.
static double scalarOf(Device &device, const Tensor &t) {
  std::vector<char> host = device.copyTensorOut(t);
  return loadElement(t.dtype, host.data(), 0);
}

std::optional<double> Executor::localScalar(size_t i) const {
  if (class_->outputBuffers[i] < 0 || !program_.outputs[i].globalShape.empty())
    return std::nullopt;
  return scalarOf(device_, output(i));
}

std::optional<double> Executor::inputScalar(size_t i) const {
  if (class_->inputBuffers[i] < 0 || !program_.inputs[i].globalShape.empty())
    return std::nullopt;
  return scalarOf(device_, input(i));
}

bool Executor::holdsParam(size_t i) const {
  return program_.inputs[i].role == InputRole::Param &&
         class_->inputBuffers[i] >= 0;
}

Executor::State Executor::saveState() const {
  State state(program_.inputs.size());
  for (size_t i = 0; i < program_.inputs.size(); ++i)
    if (holdsParam(i))
      state[i] = device_.copyTensorOut(input(i));
  return state;
}

void Executor::restoreState(const State &state) {
  for (size_t i = 0; i < program_.inputs.size() && i < state.size(); ++i)
    if (holdsParam(i))
      device_.copyTensorIn(input(i), state[i]);
}

void Executor::loadParams(CheckpointReader &reader) {
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const InputSpec &spec = program_.inputs[i];
    if (spec.role != InputRole::Param || class_->inputBuffers[i] < 0)
      continue;
    Slice slice;
    localSlice(program_, spec.globalShape, spec.sharding, rank_, slice.offsets,
               slice.shape);
    Tensor t = input(i);
    std::vector<char> host(t.bytes(), 0);
    if (spec.view) {
      // A flat view's piece: read box by box of the view.
      for (const FlatBox &box : viewBoxes(spec, slice))
        reader.read(spec.name, spec.dtype, *spec.view, box.slice,
                    host.data() + size_t(box.begin - slice.offsets[0]) *
                                      dtypeBytes(t.dtype));
      device_.copyTensorIn(t, host);
      continue;
    }
    if (slice.shape == t.shape) {
      reader.read(spec.name, spec.dtype, spec.globalShape, slice, host.data());
      device_.copyTensorIn(t, host);
      continue;
    }
    std::vector<char> compact(size_t(numElements(slice.shape)) *
                              dtypeBytes(t.dtype));
    if (!compact.empty())
      reader.read(spec.name, spec.dtype, spec.globalShape, slice,
                  compact.data());
    copyBox(slice.shape, t.shape, dtypeBytes(t.dtype), compact.data(),
            host.data(), true);
    device_.copyTensorIn(t, host);
  }
}

} // namespace par::rt
