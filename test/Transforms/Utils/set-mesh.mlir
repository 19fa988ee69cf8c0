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
// POS: par.mesh @devices <["x"=4, "y"=4, "z"=2]>
par.mesh @devices <["a"=8]>
func.func @override(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
