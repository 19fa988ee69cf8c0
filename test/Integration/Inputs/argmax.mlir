// argmax and argmin over a split dim (kept split: the local extreme and its
// global index, an all-reduce of the extremes, then of the smallest index
// that holds one), even and padded, with many ties (tokens from 4 values:
// the smallest index must win), NaN (the log of negative values: the first
// NaN must win, split or not), next to a batch split; and a par.pad with
// an infinite fill (written "-inf" in the program).
// SHARDING: tp=2 | %x=[{}, {"tp"}] %t=[{}, {"tp"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {"tp"}] %t=[{"dp"}, {"tp"}]
// SHARDING: tp=3 | %x=[{}, {"tp"}] %t=[{}, {"tp"}]
// SHARDING: tp=4 | %x=[{}, {"tp"}] %t=[{"tp"}, {}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {"tp"}] %t=[{}, {"tp"}]
// SHARDING: x=8 | %x=[{}, {"x"}] %t=[{}, {"x"}]
// SHARDING: a=2,b=4 | %x=[{"a"}, {"b"}] %t=[{"b"}, {"a"}]
func.func @argmax(%x: tensor<6x20xf32> {par.role = "data", par.data = "random"},
                  %t: tensor<8x12xi32> {par.data = "tokens", par.vocab = 4})
    -> (tensor<6xi32> {par.name = "xmax"}, tensor<6xi64> {par.name = "xmin"},
        tensor<8xi32> {par.name = "tmax"}, tensor<8xi64> {par.name = "tmin"},
        tensor<12xi32> {par.name = "tcolmax"}, tensor<6xi32> {par.name = "nanmax"},
        tensor<6xi64> {par.name = "nanmin"}, tensor<6xi32> {par.name = "padmin"}) {
  %a = par.argmax %x dim 1 : (tensor<6x20xf32>) -> tensor<6xi32>
  %b = par.argmin %x dim 1 : (tensor<6x20xf32>) -> tensor<6xi64>
  %c = par.argmax %t dim 1 : (tensor<8x12xi32>) -> tensor<8xi32>
  %d = par.argmin %t dim 1 : (tensor<8x12xi32>) -> tensor<8xi64>
  %e = par.argmax %t dim 0 : (tensor<8x12xi32>) -> tensor<12xi32>
  %l = par.log %x : tensor<6x20xf32>
  %f = par.argmax %l dim 1 : (tensor<6x20xf32>) -> tensor<6xi32>
  %g = par.argmin %l dim 1 : (tensor<6x20xf32>) -> tensor<6xi64>
  %p = par.pad %x low [0, 3] high [0, 1] {fill = 0xFFF0000000000000 : f64} : (tensor<6x20xf32>) -> tensor<6x24xf32>
  %h = par.argmin %p dim 1 : (tensor<6x24xf32>) -> tensor<6xi32>
  return %a, %b, %c, %d, %e, %f, %g, %h : tensor<6xi32>, tensor<6xi64>, tensor<8xi32>, tensor<8xi64>, tensor<12xi32>, tensor<6xi32>, tensor<6xi64>, tensor<6xi32>
}
