this is not MLIR at all
