// Reshapes/transposes of sharded dims: [b,s,h]->[b,s,nh,dh]->[b,nh,s,dh], batched dots, merge [b,s]->[b*s].
// SHARDING: tp=2 | %wq=[{}, {"tp"}] %wk=[{}, {"tp"}] %wv=[{}, {"tp"}] %wo=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}, {}] %wq=[{}, {"tp"}] %wk=[{}, {"tp"}] %wv=[{}, {"tp"}] %wo=[{"tp"}, {}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}, {}] %wq=[{}, {"tp"}] %wk=[{}, {"tp"}] %wv=[{}, {"tp"}] %wo=[{"tp"}, {}]
// SHARDING: dp=4,tp=2 | %x=[{"dp"}, {}, {}] %wq=[{}, {"tp"}]
// SHARDING: dp=4,sp=2 | %x=[{"dp"}, {"sp"}, {}]
// SHARDING: x=8 | %wk=[{}, {"x"}] %wo=[{"x"}, {}]
func.func @reshape_heavy(%x: tensor<4x8x32xf32> {par.role = "data", par.data = "random"},
                         %wq: tensor<32x32xf32> {par.init = "normal(0.2)"},
                         %wk: tensor<32x32xf32> {par.init = "normal(0.2)"},
                         %wv: tensor<32x32xf32> {par.init = "normal(0.2)"},
                         %wo: tensor<32x32xf32> {par.init = "normal(0.2)"})
    -> (tensor<4x8x32xf32> {par.name = "y"}, tensor<32x32xf32> {par.name = "yt"}) {
  %q = par.dot %x, %wq contract [2] x [0] : (tensor<4x8x32xf32>, tensor<32x32xf32>) -> tensor<4x8x32xf32>
  %k = par.dot %x, %wk contract [2] x [0] : (tensor<4x8x32xf32>, tensor<32x32xf32>) -> tensor<4x8x32xf32>
  %v = par.dot %x, %wv contract [2] x [0] : (tensor<4x8x32xf32>, tensor<32x32xf32>) -> tensor<4x8x32xf32>
  %q4 = par.reshape %q : (tensor<4x8x32xf32>) -> tensor<4x8x4x8xf32>
  %k4 = par.reshape %k : (tensor<4x8x32xf32>) -> tensor<4x8x4x8xf32>
  %v4 = par.reshape %v : (tensor<4x8x32xf32>) -> tensor<4x8x4x8xf32>
  %qt = par.transpose %q4 perm [0, 2, 1, 3] : (tensor<4x8x4x8xf32>) -> tensor<4x4x8x8xf32>
  %kt = par.transpose %k4 perm [0, 2, 3, 1] : (tensor<4x8x4x8xf32>) -> tensor<4x4x8x8xf32>
  %vt = par.transpose %v4 perm [0, 2, 1, 3] : (tensor<4x8x4x8xf32>) -> tensor<4x4x8x8xf32>
  %s = par.dot %qt, %kt batch [0, 1] x [0, 1] contract [3] x [2] : (tensor<4x4x8x8xf32>, tensor<4x4x8x8xf32>) -> tensor<4x4x8x8xf32>
  %p = par.softmax %s dim 3 : tensor<4x4x8x8xf32>
  %o = par.dot %p, %vt batch [0, 1] x [0, 1] contract [3] x [2] : (tensor<4x4x8x8xf32>, tensor<4x4x8x8xf32>) -> tensor<4x4x8x8xf32>
  %ot = par.transpose %o perm [0, 2, 1, 3] : (tensor<4x4x8x8xf32>) -> tensor<4x8x4x8xf32>
  %o2 = par.reshape %ot : (tensor<4x8x4x8xf32>) -> tensor<32x32xf32>
  %y2 = par.dot %o2, %wo contract [1] x [0] : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %y = par.reshape %y2 : (tensor<32x32xf32>) -> tensor<4x8x32xf32>
  %yt = par.transpose %y2 perm [1, 0] : (tensor<32x32xf32>) -> tensor<32x32xf32>
  return %y, %yt : tensor<4x8x32xf32>, tensor<32x32xf32>
}
