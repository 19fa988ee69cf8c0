// RUN: par-opt %s --par-to-local | FileCheck %s
// The reshard table: every pair of {replicated, dim0 on x, dim1 on x, dim0 on
// y, dim0 on x+y, dim0 on x & dim1 on y, partial over x} for an 8x8 tensor
// on a 2x2 mesh, with the collective sequence each becomes; where every
// sequence would move more than each device lacks, one par.exchange.
// Reshards into a partial layout come only from partial values (see
// partition-errors.mlir). No sequence here gathers and slices a dim again.

par.mesh @mesh <["x"=2, "y"=2]>

// CHECK-LABEL: func.func @repl_to_repl(
// CHECK-NEXT: return %arg0 : tensor<8x8xf32>
func.func @repl_to_repl(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %r = par.reshard %v <@mesh, [{}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @repl_to_d0x(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["x"] dim 0 : (tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @repl_to_d0x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @repl_to_d1x(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["x"] dim 1 : (tensor<8x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x4xf32>
func.func @repl_to_d1x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) {
  %r = par.reshard %v <@mesh, [{}, {"x"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @repl_to_d0y(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["y"] dim 0 : (tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @repl_to_d0y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @repl_to_d0xy(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["x", "y"] dim 0 : (tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<2x8xf32>
func.func @repl_to_d0xy(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x", "y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @repl_to_d0x_d1y(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["x"] dim 0 : (tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_slice %[[V0]] over @mesh ["y"] dim 1 : (tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[V1]] : tensor<4x4xf32>
func.func @repl_to_d0x_d1y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_to_repl(
// CHECK-NEXT: %[[V0:.*]] = par.all_gather %arg0 over @mesh ["x"] dim 0 : (tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x8xf32>
func.func @d0x_to_repl(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %r = par.reshard %v <@mesh, [{}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_to_d0x(
// CHECK-NEXT: return %arg0 : tensor<4x8xf32>
func.func @d0x_to_d0x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_to_d1x(
// CHECK-NEXT: %[[V0:.*]] = par.all_to_all %arg0 over @mesh ["x"] split 1 concat 0 : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x4xf32>
func.func @d0x_to_d1x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) {
  %r = par.reshard %v <@mesh, [{}, {"x"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_to_d0y(
// CHECK-NEXT: %[[V0:.*]] = par.collective_permute %arg0 over @mesh ["x", "y"] pairs [0 -> 0, 2 -> 1, 1 -> 2, 3 -> 3] : tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @d0x_to_d0y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_to_d0xy(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["y"] dim 0 : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<2x8xf32>
func.func @d0x_to_d0xy(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x", "y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_to_d0x_d1y(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["y"] dim 1 : (tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x4xf32>
func.func @d0x_to_d0x_d1y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d1x_to_repl(
// CHECK-NEXT: %[[V0:.*]] = par.all_gather %arg0 over @mesh ["x"] dim 1 : (tensor<8x4xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x8xf32>
func.func @d1x_to_repl(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %r = par.reshard %v <@mesh, [{}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d1x_to_d0x(
// CHECK-NEXT: %[[V0:.*]] = par.all_to_all %arg0 over @mesh ["x"] split 0 concat 1 : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @d1x_to_d0x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d1x_to_d1x(
// CHECK-NEXT: return %arg0 : tensor<8x4xf32>
func.func @d1x_to_d1x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) {
  %r = par.reshard %v <@mesh, [{}, {"x"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d1x_to_d0y(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["y"] dim 0 : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_gather %[[V0]] over @mesh ["x"] dim 1 : (tensor<4x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V1]] : tensor<4x8xf32>
func.func @d1x_to_d0y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d1x_to_d0xy(
// CHECK-NEXT: %[[V0:.*]] = par.exchange %arg0 over @mesh ["x", "y"] from {{\[\[}}], [0]] to {{\[\[}}0, 1], []] : (tensor<8x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<2x8xf32>
func.func @d1x_to_d0xy(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x", "y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d1x_to_d0x_d1y(
// CHECK-NEXT: %[[V0:.*]] = par.all_to_all %arg0 over @mesh ["x"] split 0 concat 1 : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_slice %[[V0]] over @mesh ["y"] dim 1 : (tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[V1]] : tensor<4x4xf32>
func.func @d1x_to_d0x_d1y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0y_to_repl(
// CHECK-NEXT: %[[V0:.*]] = par.all_gather %arg0 over @mesh ["y"] dim 0 : (tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x8xf32>
func.func @d0y_to_repl(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %r = par.reshard %v <@mesh, [{}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0y_to_d0x(
// CHECK-NEXT: %[[V0:.*]] = par.collective_permute %arg0 over @mesh ["y", "x"] pairs [0 -> 0, 2 -> 1, 1 -> 2, 3 -> 3] : tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @d0y_to_d0x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0y_to_d1x(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["x"] dim 1 : (tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_gather %[[V0]] over @mesh ["y"] dim 0 : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[V1]] : tensor<8x4xf32>
func.func @d0y_to_d1x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) {
  %r = par.reshard %v <@mesh, [{}, {"x"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0y_to_d0y(
// CHECK-NEXT: return %arg0 : tensor<4x8xf32>
func.func @d0y_to_d0y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0y_to_d0xy(
// CHECK-NEXT: %[[V0:.*]] = par.all_slice %arg0 over @mesh ["x"] dim 0 : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[V1:.*]] = par.collective_permute %[[V0]] over @mesh ["y", "x"] pairs [0 -> 0, 2 -> 1, 1 -> 2, 3 -> 3] : tensor<2x8xf32>
// CHECK-NEXT: return %[[V1]] : tensor<2x8xf32>
func.func @d0y_to_d0xy(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x", "y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0y_to_d0x_d1y(
// CHECK-NEXT: %[[V0:.*]] = par.all_to_all %arg0 over @mesh ["y"] split 1 concat 0 : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_slice %[[V0]] over @mesh ["x"] dim 0 : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[V1]] : tensor<4x4xf32>
func.func @d0y_to_d0x_d1y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0xy_to_repl(
// CHECK-NEXT: %[[V0:.*]] = par.all_gather %arg0 over @mesh ["x", "y"] dim 0 : (tensor<2x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x8xf32>
func.func @d0xy_to_repl(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %r = par.reshard %v <@mesh, [{}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0xy_to_d0x(
// CHECK-NEXT: %[[V0:.*]] = par.all_gather %arg0 over @mesh ["y"] dim 0 : (tensor<2x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @d0xy_to_d0x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0xy_to_d1x(
// CHECK-NEXT: %[[V0:.*]] = par.exchange %arg0 over @mesh ["x", "y"] from {{\[\[}}0, 1], []] to {{\[\[}}], [0]] : (tensor<2x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x4xf32>
func.func @d0xy_to_d1x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) {
  %r = par.reshard %v <@mesh, [{}, {"x"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0xy_to_d0y(
// CHECK-NEXT: %[[V0:.*]] = par.exchange %arg0 over @mesh ["x", "y"] from {{\[\[}}0, 1], []] to {{\[\[}}1], []] : (tensor<2x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @d0xy_to_d0y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0xy_to_d0xy(
// CHECK-NEXT: return %arg0 : tensor<2x8xf32>
func.func @d0xy_to_d0xy(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x", "y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0xy_to_d0x_d1y(
// CHECK-NEXT: %[[V0:.*]] = par.all_to_all %arg0 over @mesh ["y"] split 1 concat 0 : (tensor<2x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x4xf32>
func.func @d0xy_to_d0x_d1y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_d1y_to_repl(
// CHECK-NEXT: %[[V0:.*]] = par.all_gather %arg0 over @mesh ["x"] dim 0 : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_gather %[[V0]] over @mesh ["y"] dim 1 : (tensor<8x4xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return %[[V1]] : tensor<8x8xf32>
func.func @d0x_d1y_to_repl(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %r = par.reshard %v <@mesh, [{}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_d1y_to_d0x(
// CHECK-NEXT: %[[V0:.*]] = par.all_gather %arg0 over @mesh ["y"] dim 1 : (tensor<4x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @d0x_d1y_to_d0x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_d1y_to_d1x(
// CHECK-NEXT: %[[V0:.*]] = par.exchange %arg0 over @mesh ["x", "y"] from {{\[\[}}0], [1]] to {{\[\[}}], [0]] : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x4xf32>
func.func @d0x_d1y_to_d1x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) {
  %r = par.reshard %v <@mesh, [{}, {"x"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_d1y_to_d0y(
// CHECK-NEXT: %[[V0:.*]] = par.exchange %arg0 over @mesh ["x", "y"] from {{\[\[}}0], [1]] to {{\[\[}}1], []] : (tensor<4x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @d0x_d1y_to_d0y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_d1y_to_d0xy(
// CHECK-NEXT: %[[V0:.*]] = par.all_to_all %arg0 over @mesh ["y"] split 0 concat 1 : (tensor<4x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<2x8xf32>
func.func @d0x_d1y_to_d0xy(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x", "y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @d0x_d1y_to_d0x_d1y(
// CHECK-NEXT: return %arg0 : tensor<4x4xf32>
func.func @d0x_d1y_to_d0x_d1y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @px_to_repl(
// CHECK-NEXT: %[[V0:.*]] = par.all_reduce sum %arg0 over @mesh ["x"] : tensor<8x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x8xf32>
func.func @px_to_repl(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %r = par.reshard %v <@mesh, [{}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @px_to_d0x(
// CHECK-NEXT: %[[V0:.*]] = par.reduce_scatter sum %arg0 over @mesh ["x"] dim 0 : (tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V0]] : tensor<4x8xf32>
func.func @px_to_d0x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @px_to_d1x(
// CHECK-NEXT: %[[V0:.*]] = par.reduce_scatter sum %arg0 over @mesh ["x"] dim 1 : (tensor<8x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[V0]] : tensor<8x4xf32>
func.func @px_to_d1x(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) {
  %r = par.reshard %v <@mesh, [{}, {"x"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @px_to_d0y(
// CHECK-NEXT: %[[V0:.*]] = par.all_reduce sum %arg0 over @mesh ["x"] : tensor<8x8xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_slice %[[V0]] over @mesh ["y"] dim 0 : (tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[V1]] : tensor<4x8xf32>
func.func @px_to_d0y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @px_to_d0xy(
// CHECK-NEXT: %[[V0:.*]] = par.reduce_scatter sum %arg0 over @mesh ["x"] dim 0 : (tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_slice %[[V0]] over @mesh ["y"] dim 0 : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[V1]] : tensor<2x8xf32>
func.func @px_to_d0xy(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) {
  %r = par.reshard %v <@mesh, [{"x", "y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @px_to_d0x_d1y(
// CHECK-NEXT: %[[V0:.*]] = par.reduce_scatter sum %arg0 over @mesh ["x"] dim 0 : (tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[V1:.*]] = par.all_slice %[[V0]] over @mesh ["y"] dim 1 : (tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[V1]] : tensor<4x4xf32>
func.func @px_to_d0x_d1y(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %r = par.reshard %v <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @px_to_px(
// CHECK-NEXT: return %arg0 : tensor<8x8xf32>
func.func @px_to_px(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>}) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>}) {
  %r = par.reshard %v <@mesh, [{}, {}], partial={"x"}> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
