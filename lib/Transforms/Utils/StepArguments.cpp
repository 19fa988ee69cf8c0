//===- StepArguments.cpp - What feeds each function argument --------------===//

#include "par/Transforms/StepArguments.h"

#include "par/Dialect/Par/IR/ParOps.h"

using namespace mlir;
using namespace mlir::par;

void mlir::par::inferInputRoles(func::FuncOp func) {
  if (func.isDeclaration())
    return;
  MLIRContext *ctx = func.getContext();
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (func.getArgAttr(index, ParDialect::kDataAttrName) ||
        !isa<IntegerType>(getElementTypeOrSelf(arg.getType())))
      continue;
    StringRef kind;
    int64_t vocab = 0;
    // Reshards and constraints move the ids, not change them: look through.
    SmallVector<Operation *> users(arg.getUsers().begin(),
                                   arg.getUsers().end());
    SmallVector<Value> reads{arg};
    for (size_t i = 0; i < users.size(); ++i)
      if (isa<ReshardOp, ShardingConstraintOp>(users[i])) {
        Value moved = users[i]->getResult(0);
        reads.push_back(moved);
        users.append(moved.getUsers().begin(), moved.getUsers().end());
      }
    auto readsArg = [&](Value v) { return llvm::is_contained(reads, v); };
    for (Operation *user : users) {
      auto reader = dyn_cast<DataOperandOpInterface>(user);
      if (!reader)
        continue;
      std::optional<DataOperand> data = reader.getDataOperand();
      if (!data || !readsArg(user->getOperand(data->operand)))
        continue;
      if (kind.empty() || data->kind == "tokens") {
        kind = data->kind;
        vocab = data->vocab;
      }
      if (kind == "tokens")
        break;
    }
    if (kind.empty())
      continue;
    func.setArgAttr(index, ParDialect::kDataAttrName,
                    StringAttr::get(ctx, kind));
    if (!func.getArgAttr(index, ParDialect::kVocabAttrName))
      func.setArgAttr(index, ParDialect::kVocabAttrName,
                      IntegerAttr::get(IntegerType::get(ctx, 64), vocab));
  }
}

bool mlir::par::isParameter(func::FuncOp func, unsigned index) {
  if (auto role =
          func.getArgAttrOfType<StringAttr>(index, ParDialect::kRoleAttrName))
    return role.getValue() == "param";
  return isa<FloatType>(getElementTypeOrSelf(func.getArgumentTypes()[index]));
}

SmallVector<BlockArgument> mlir::par::dataArguments(func::FuncOp func) {
  SmallVector<BlockArgument> data;
  for (BlockArgument arg : func.getArguments())
    if (!isParameter(func, arg.getArgNumber()) && !arg.use_empty())
      data.push_back(arg);
  return data;
}

int64_t mlir::par::zeroShardDim(ArrayRef<int64_t> localShape, int64_t n) {
  int64_t chosen = -1, fewest = 0;
  for (auto [d, size] : llvm::enumerate(localShape)) {
    if (size < n || size <= 1)
      continue; // a dim never has more pieces than elements
    // Elements per device (a shape fits int64: so does any part of it).
    int64_t perDevice = (size + n - 1) / n;
    for (auto [e, other] : llvm::enumerate(localShape))
      if (e != d)
        perDevice *= other;
    if (chosen < 0 || perDevice < fewest) {
      chosen = int64_t(d);
      fewest = perDevice;
    }
  }
  return chosen;
}

bool mlir::par::isScalarBroadcast(Value value) {
  auto broadcast = value.getDefiningOp<BroadcastOp>();
  return broadcast &&
         cast<RankedTensorType>(broadcast.getInput().getType()).getRank() == 0;
}
