// Data movement and reductions: broadcast (new and size-1 dims), reduce
// sum/mean/max/min, transpose, reshape, slice, concat, convert.
func.func @shapes(%x: tensor<4x6xf32> {par.role = "data", par.data = "random"},
                  %w: tensor<6xf32> {par.name = "w", par.init = "normal(0.5)"},
                  %c: tensor<4x1xf32> {par.name = "c", par.init = "normal(0.5)"})
    -> tensor<f32> {
  %wb = par.broadcast %w dims [1] : (tensor<6xf32>) -> tensor<4x6xf32>
  %cb = par.broadcast %c dims [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %a = par.mul %x, %wb : tensor<4x6xf32>
  %b = par.add %a, %cb : tensor<4x6xf32>
  %t = par.transpose %b perm [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %r = par.reshape %t : (tensor<6x4xf32>) -> tensor<3x8xf32>
  %s = par.slice %r starts [0, 2] limits [3, 7] : (tensor<3x8xf32>) -> tensor<3x5xf32>
  %k = par.concat %s, %s dim 1 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x10xf32>
  %d = par.convert %k : tensor<3x10xf32> to tensor<3x10xf64>
  %e = par.convert %d : tensor<3x10xf64> to tensor<3x10xf32>
  %sq = par.mul %e, %e : tensor<3x10xf32>
  %m1 = par.reduce mean %sq dims [1] : (tensor<3x10xf32>) -> tensor<3xf32>
  %m2 = par.reduce max %e dims [1] : (tensor<3x10xf32>) -> tensor<3xf32>
  %m3 = par.reduce min %b dims [0] : (tensor<4x6xf32>) -> tensor<6xf32>
  %l1 = par.reduce sum %m1 dims [0] : (tensor<3xf32>) -> tensor<f32>
  %l2 = par.reduce sum %m2 dims [0] : (tensor<3xf32>) -> tensor<f32>
  %l3 = par.reduce sum %m3 dims [0] : (tensor<6xf32>) -> tensor<f32>
  %l12 = par.add %l1, %l2 : tensor<f32>
  %loss = par.add %l12, %l3 : tensor<f32>
  return %loss : tensor<f32>
}
