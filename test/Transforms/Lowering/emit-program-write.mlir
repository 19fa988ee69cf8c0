// The program file must be writable: an unwritable path is an error naming it.
// RUN: not par-opt %s --par-emit-program=file=%t.no-dir/p.json -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: cannot write the program to '{{.*}}no-dir/p.json'
func.func @ok(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
