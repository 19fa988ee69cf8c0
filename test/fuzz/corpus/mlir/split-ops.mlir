// par-fuzz: mesh=dp=2,tp=4 passes=par-autodiff{optimizer=sgd},par-propagate,par-partition
// The ops that keep a split through their reduced, searched or indexed
// dim (softmax, log_softmax, layer_norm, rms_norm, argmax, argmin,
// gather) and pad, in a training step over uneven splits.
func.func @split_ops(%x: tensor<4x6x20xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>, par.role = "data", par.data = "random"},
                     %ids: tensor<4x6x1xi32> {par.data = "tokens", par.vocab = 11},
                     %w: tensor<10x20xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>, par.name = "w", par.init = "normal(0.5)"},
                     %g: tensor<20xf32> {par.name = "g", par.init = "ones"},
                     %b: tensor<20xf32> {par.name = "b", par.init = "zeros"}) -> (tensor<f32>, tensor<4x6xi32>, tensor<4x20xi64>) {
  %r = par.gather %w[%ids] dims [0] : (tensor<10x20xf32>, tensor<4x6x1xi32>) -> tensor<4x6x20xf32>
  %h = par.add %x, %r : tensor<4x6x20xf32>
  %ln = par.layer_norm %h, %g, %b : tensor<4x6x20xf32>, tensor<20xf32>
  %rm = par.rms_norm %ln, %g : tensor<4x6x20xf32>, tensor<20xf32>
  %sm = par.softmax %rm dim 2 : tensor<4x6x20xf32>
  %ls = par.log_softmax %sm dim 1 : tensor<4x6x20xf32>
  %p = par.pad %ls low [0, 1, 0] high [0, 0, 2] interior [0, 0, 1] {fill = -1.0 : f64} : (tensor<4x6x20xf32>) -> tensor<4x7x41xf32>
  %t = par.slice %p starts [0, 1, 0] limits [4, 7, 41] strides [1, 1, 2] : (tensor<4x7x41xf32>) -> tensor<4x6x21xf32>
  %q = par.mul %t, %t : tensor<4x6x21xf32>
  %loss = par.reduce mean %q dims [0, 1, 2] : (tensor<4x6x21xf32>) -> tensor<f32>
  %am = par.argmax %h dim 2 : (tensor<4x6x20xf32>) -> tensor<4x6xi32>
  %an = par.argmin %h dim 1 : (tensor<4x6x20xf32>) -> tensor<4x20xi64>
  return %loss, %am, %an : tensor<f32>, tensor<4x6xi32>, tensor<4x20xi64>
}
