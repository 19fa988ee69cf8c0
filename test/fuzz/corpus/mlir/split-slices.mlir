// par-fuzz: passes=par-propagate,par-partition
// Slice (shifted, strided, narrow), pad (edge and interior) and concat along
// a split dim, kept split by exchanges with index maps.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @split_slices(%x: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>, par.role = "data", par.data = "random"},
                        %y: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>, par.role = "data", par.data = "random"})
    -> (tensor<8x62xf32> {par.name = "shift"}, tensor<8x32xf32> {par.name = "stride"}, tensor<8x2xf32> {par.name = "narrow"},
        tensor<8x68xf32> {par.name = "padded"}, tensor<8x63xf32> {par.name = "spread"}, tensor<8x80xf32> {par.name = "cat"}) {
  %shift = par.slice %x starts [0, 1] limits [8, 63] : (tensor<8x64xf32>) -> tensor<8x62xf32>
  %stride = par.slice %x starts [0, 0] limits [8, 64] strides [1, 2] : (tensor<8x64xf32>) -> tensor<8x32xf32>
  %narrow = par.slice %x starts [0, 30] limits [8, 32] : (tensor<8x64xf32>) -> tensor<8x2xf32>
  %padded = par.pad %x low [0, 1] high [0, 3] {fill = -1.0} : (tensor<8x64xf32>) -> tensor<8x68xf32>
  %spread = par.pad %stride low [0, 0] high [0, 0] interior [0, 1] : (tensor<8x32xf32>) -> tensor<8x63xf32>
  %cat = par.concat %x, %y dim 1 : (tensor<8x64xf32>, tensor<8x16xf32>) -> tensor<8x80xf32>
  return %shift, %stride, %narrow, %padded, %spread, %cat : tensor<8x62xf32>, tensor<8x32xf32>, tensor<8x2xf32>, tensor<8x68xf32>, tensor<8x63xf32>, tensor<8x80xf32>
}
