//===- ParAttrs.cpp - sharding attributes ---------------------------------===//
#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::par;

#define GET_ATTRDEF_CLASSES
#include "par/Dialect/Par/IR/ParAttrs.cpp.inc"

#include "par/Dialect/Par/IR/ParEnums.cpp.inc"

void ParDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "par/Dialect/Par/IR/ParAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Axis lists: `{"a", "b"}`
//===----------------------------------------------------------------------===//

/// `"a", "b"` (no braces).
static void printAxisNames(AsmPrinter &printer, ArrayRef<StringAttr> axes) {
  llvm::interleaveComma(axes, printer, [&](StringAttr axis) {
    printer.printString(axis.getValue());
  });
}

static void printAxisSet(AsmPrinter &printer, ArrayRef<StringAttr> axes) {
  printer << "{";
  printAxisNames(printer, axes);
  printer << "}";
}

static ParseResult parseAxisSet(AsmParser &parser,
                                SmallVectorImpl<StringAttr> &axes) {
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Braces, [&]() -> ParseResult {
        std::string name;
        if (parser.parseString(&name))
          return failure();
        axes.push_back(parser.getBuilder().getStringAttr(name));
        return success();
      });
}

//===----------------------------------------------------------------------===//
// DimShardingAttr
//===----------------------------------------------------------------------===//

void DimShardingAttr::printBare(AsmPrinter &printer) const {
  printer << "{";
  printAxisNames(printer, getAxes());
  if (isOpen())
    printer << (getAxes().empty() ? "?" : ", ?");
  printer << "}";
  if (getPriority())
    printer << "p" << *getPriority();
}

DimShardingAttr DimShardingAttr::parseBare(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<StringAttr> axes;
  bool closed = true;
  auto parseElement = [&]() -> ParseResult {
    if (!closed)
      return parser.emitError(parser.getCurrentLocation(),
                              "'?' must be the last entry of a dimension");
    if (succeeded(parser.parseOptionalQuestion())) {
      closed = false;
      return success();
    }
    std::string name;
    if (parser.parseString(&name))
      return failure();
    axes.push_back(parser.getBuilder().getStringAttr(name));
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces,
                                     parseElement))
    return nullptr;
  std::optional<int64_t> priority;
  SMLoc priorityLoc = parser.getCurrentLocation();
  StringRef keyword;
  if (succeeded(parser.parseOptionalKeyword(&keyword))) {
    int64_t value = 0;
    if (!keyword.starts_with("p") ||
        keyword.drop_front().getAsInteger(10, value) || value < 0) {
      parser.emitError(priorityLoc)
          << "invalid priority '" << keyword
          << "': expected 'p' followed by a non-negative integer, e.g. p0";
      return nullptr;
    }
    priority = value;
  }
  return DimShardingAttr::getChecked([&]() { return parser.emitError(loc); },
                                     parser.getContext(), axes, closed,
                                     priority);
}

void DimShardingAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printBare(printer);
  printer << ">";
}

Attribute DimShardingAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  DimShardingAttr dim = parseBare(parser);
  if (!dim || parser.parseGreater())
    return {};
  return dim;
}

LogicalResult
DimShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        ArrayRef<StringAttr> axes, bool isClosed,
                        std::optional<int64_t> priority) {
  if (priority && *priority < 0)
    return emitError() << "priority must be non-negative, got " << *priority;
  llvm::SmallDenseSet<StringAttr> seen;
  for (StringAttr axis : axes) {
    if (axis.getValue().empty())
      return emitError() << "mesh axis names must not be empty";
    if (!seen.insert(axis).second)
      return emitError() << "axis \"" << axis.getValue()
                         << "\" is used twice in one dimension";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printAttribute(getMesh());
  printer << ", [";
  llvm::interleaveComma(getDims(), printer,
                        [&](DimShardingAttr dim) { dim.printBare(printer); });
  printer << "]";
  if (!getReplicatedAxes().empty()) {
    printer << ", replicated=";
    printAxisSet(printer, getReplicatedAxes());
  }
  if (!getPartialAxes().empty()) {
    printer << ", partial=";
    printAxisSet(printer, getPartialAxes());
  }
  printer << ">";
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  FlatSymbolRefAttr mesh;
  if (parser.parseLess())
    return {};
  SMLoc meshLoc = parser.getCurrentLocation();
  Attribute meshAttr;
  if (parser.parseAttribute(meshAttr))
    return {};
  mesh = dyn_cast<FlatSymbolRefAttr>(meshAttr);
  if (!mesh) {
    parser.emitError(meshLoc, "expected a mesh symbol such as @mesh, got ")
        << meshAttr;
    return {};
  }
  SmallVector<DimShardingAttr> dims;
  if (parser.parseComma() ||
      parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            DimShardingAttr dim = DimShardingAttr::parseBare(parser);
            if (!dim)
              return failure();
            dims.push_back(dim);
            return success();
          }))
    return {};
  SmallVector<StringAttr> replicated, partial;
  bool seenReplicated = false, seenPartial = false;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc keyLoc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key))
      return {};
    bool *seen = key == "replicated" ? &seenReplicated
                 : key == "partial"  ? &seenPartial
                                     : nullptr;
    if (!seen) {
      parser.emitError(keyLoc, "expected 'replicated' or 'partial', got '")
          << key << "'";
      return {};
    }
    if (*seen) {
      parser.emitError(keyLoc, "'") << key << "' is given twice";
      return {};
    }
    *seen = true;
    if (parser.parseEqual() ||
        parseAxisSet(parser, key == "replicated" ? replicated : partial))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return ShardingAttr::getChecked([&]() { return parser.emitError(loc); },
                                  parser.getContext(), mesh, dims, replicated,
                                  partial);
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh,
                                   ArrayRef<DimShardingAttr> dims,
                                   ArrayRef<StringAttr> replicated,
                                   ArrayRef<StringAttr> partial) {
  if (!mesh)
    return emitError() << "a sharding needs a mesh";
  // Where each axis was seen first: "sharded", "replicated" or "partial".
  llvm::SmallDenseMap<StringAttr, StringRef> role;
  auto claim = [&](StringAttr axis, StringRef what) -> LogicalResult {
    if (axis.getValue().empty())
      return emitError() << "mesh axis names must not be empty";
    auto [it, inserted] = role.try_emplace(axis, what);
    if (inserted)
      return success();
    if (it->second == what)
      return emitError() << "axis \"" << axis.getValue()
                         << "\" is used twice in one sharding";
    return emitError() << "axis \"" << axis.getValue() << "\" is both "
                       << it->second << " and " << what;
  };
  for (DimShardingAttr dim : dims) {
    if (!dim)
      return emitError() << "null dimension sharding";
    for (StringAttr axis : dim.getAxes())
      if (failed(claim(axis, "sharded")))
        return failure();
  }
  for (StringAttr axis : replicated)
    if (failed(claim(axis, "replicated")))
      return failure();
  for (StringAttr axis : partial)
    if (failed(claim(axis, "partial")))
      return failure();
  return success();
}

SmallVector<StringAttr> ShardingAttr::getShardingAxes() const {
  SmallVector<StringAttr> axes;
  for (DimShardingAttr dim : getDims())
    llvm::append_range(axes, dim.getAxes());
  return axes;
}

bool ShardingAttr::isFullyReplicated() const {
  return getPartialAxes().empty() &&
         llvm::all_of(getDims(), [](DimShardingAttr dim) {
           return dim.getAxes().empty();
         });
}

LogicalResult ShardingAttr::verifyForType(
    Type type, Operation *from,
    function_ref<InFlightDiagnostic()> emitError) const {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType)
    return emitError() << "a sharding applies to a ranked tensor, not " << type;
  if (tensorType.getRank() != getRank())
    return emitError() << "the sharding has " << getRank()
                       << " dimension(s) but " << type << " has rank "
                       << tensorType.getRank();
  MeshOp meshOp = lookupMesh(from, getMesh());
  if (!meshOp)
    return emitError() << "unknown mesh " << getMesh()
                       << " (declare it with 'par.mesh " << getMesh()
                       << " <[...]>' or pass --mesh)";
  auto checkAxis = [&](StringAttr axis) -> LogicalResult {
    if (meshOp.getAxisIndex(axis.getValue()) >= 0)
      return success();
    InFlightDiagnostic diag = emitError();
    diag << "unknown axis \"" << axis.getValue() << "\" in mesh " << getMesh()
         << " (axes:";
    for (StringRef name : meshOp.getAxisNames().getAsValueRange<StringAttr>())
      diag << " \"" << name << "\"";
    return diag << ")";
  };
  for (StringAttr axis : getShardingAxes())
    if (failed(checkAxis(axis)))
      return failure();
  for (StringAttr axis : getReplicatedAxes())
    if (failed(checkAxis(axis)))
      return failure();
  for (StringAttr axis : getPartialAxes())
    if (failed(checkAxis(axis)))
      return failure();
  for (auto [d, dim] : llvm::enumerate(getDims())) {
    int64_t shards = meshOp.getNumShards(dim.getAxes());
    int64_t size = tensorType.getDimSize(d);
    if (!dim.getAxes().empty() && !ShapedType::isDynamic(size) &&
        shards > size) {
      InFlightDiagnostic diag = emitError();
      diag << "dimension " << d << " of size " << size << " is split into "
           << shards << " shards by axes";
      for (StringAttr axis : dim.getAxes())
        diag << " \"" << axis.getValue() << "\"";
      return diag << "; a dimension cannot have more shards than elements";
    }
  }
  return success();
}
