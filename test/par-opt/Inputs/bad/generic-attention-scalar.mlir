func.func @f(%q: tensor<f32>) -> tensor<f32> {
  %y = "par.attention"(%q, %q, %q) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}
