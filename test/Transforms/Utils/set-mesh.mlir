// RUN: par-opt %s -split-input-file --par-set-mesh="mesh=dp=2,tp=4" | FileCheck %s
// RUN: par-opt %s -split-input-file --par-set-mesh="mesh=4x4x2" | FileCheck %s --check-prefix=POS

// A module without a mesh gets @mesh at the top.
// CHECK-LABEL: module
// CHECK-NEXT: par.mesh @mesh <["dp"=2, "tp"=4]>
// CHECK-LABEL: func @no_mesh
// POS-LABEL: module
// POS-NEXT: par.mesh @mesh <["x"=4, "y"=4, "z"=2]>
func.func @no_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// An existing mesh keeps its name and gets the new axes.
// CHECK-LABEL: module
// CHECK-NEXT: par.mesh @devices <["dp"=2, "tp"=4]>
// CHECK-NOT: par.mesh
// CHECK-LABEL: func @override
// Positional sizes resize its axes in order and keep their names; extra
// sizes add axes.
// POS-LABEL: module
// POS-NEXT: par.mesh @devices <["a"=4, "y"=4, "z"=2]>
par.mesh @devices <["a"=8]>
func.func @override(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// Positional sizes keep the axes the shardings name: dp and tp are resized
// in order, the third size adds an axis named z.
// CHECK-LABEL: module
// CHECK-NEXT: par.mesh @mesh <["dp"=2, "tp"=4]>
// POS-LABEL: module
// POS-NEXT: par.mesh @mesh <["dp"=4, "tp"=4, "z"=2]>
// POS: par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>
par.mesh @mesh <["dp"=8, "tp"=1]>
func.func @named(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// An extra axis whose default name the mesh has already takes another.
// POS-LABEL: module
// POS-NEXT: par.mesh @mesh <["z"=4, "y"=4, "a0"=2]>
par.mesh @mesh <["z"=2, "y"=2]>
func.func @taken(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
