// par.pad (low, high, interior, a non-zero fill) and strided slices: the
// gradient of a pad is the strided slice the operand landed on, that of a
// strided slice a pad with interior zeros.
func.func @pad_strided(%x: tensor<4x6xf32> {par.role = "data", par.data = "random"},
                       %w: tensor<4x6xf32> {par.name = "w", par.init = "normal(0.5)"})
    -> tensor<f32> {
  %a = par.mul %x, %w : tensor<4x6xf32>
  %p = par.pad %a low [1, 0] high [0, 2] interior [1, 2] {fill = 0.5 : f64} : (tensor<4x6xf32>) -> tensor<8x18xf32>
  %t = par.tanh %p : tensor<8x18xf32>
  %s = par.slice %t starts [1, 0] limits [8, 17] strides [2, 3] : (tensor<8x18xf32>) -> tensor<4x6xf32>
  %u = par.slice %w starts [0, 1] limits [4, 6] strides [3, 2] : (tensor<4x6xf32>) -> tensor<2x3xf32>
  %sq = par.mul %s, %s : tensor<4x6xf32>
  %l1 = par.reduce sum %sq dims [0, 1] : (tensor<4x6xf32>) -> tensor<f32>
  %e = par.exp %u : tensor<2x3xf32>
  %l2 = par.reduce mean %e dims [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %loss = par.add %l1, %l2 : tensor<f32>
  return %loss : tensor<f32>
}
