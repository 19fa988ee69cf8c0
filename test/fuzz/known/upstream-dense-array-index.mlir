// MLIR 22 parser (not par): a dense array of index elements crashes
// mlir::detail::Parser::parseDenseArrayAttr in getIntOrFloatBitWidth.
// par-opt %s -o /dev/null   -> SIGSEGV
func.func @f() attributes {a = array<index: 1>} {
  return
}
