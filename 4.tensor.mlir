par.mesh @mesh <["a"=2, "b"=4]>
func.func @gpt_narrow(%tokens: tensor<8x64xi32> {par.name = "tokens", par.data = "tokens", par.vocab = 256} loc("python_frontend/par/models.py":237:14),
                      %targets: tensor<8x64xi32> {par.name = "targets", par.data = "targets", par.vocab = 256} loc("python_frontend/par/models.py":238:15),
                      %wte: tensor<256x128xf32> {par.name = "wte", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":92:16),
                      %wpe: tensor<64x128xf32> {par.name = "wpe", par.init = "normal(0.01)"} loc("python_frontend/par/models.py":163:15),
                      %h0.ln1.g: tensor<128xf32> {par.name = "h0.ln1.g", par.init = "ones"} loc("python_frontend/par/nn.py":112:13),
                      %h0.ln1.b: tensor<128xf32> {par.name = "h0.ln1.b", par.init = "zeros"} loc("python_frontend/par/nn.py":113:13),
                      %h0.attn.wq: tensor<128x8x16xf32> {par.name = "h0.attn.wq", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"a", "b"}, {}]>} loc("python_frontend/par/nn.py":242:13),
                      %h0.attn.bq: tensor<8x16xf32> {par.name = "h0.attn.bq", par.init = "zeros", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}]>} loc("python_frontend/par/nn.py":246:13),
                      %h0.attn.wk: tensor<128x8x16xf32> {par.name = "h0.attn.wk", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"a", "b"}, {}]>} loc("python_frontend/par/nn.py":242:13),
                      %h0.attn.bk: tensor<8x16xf32> {par.name = "h0.attn.bk", par.init = "zeros", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}]>} loc("python_frontend/par/nn.py":246:13),
                      %h0.attn.wv: tensor<128x8x16xf32> {par.name = "h0.attn.wv", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"a", "b"}, {}]>} loc("python_frontend/par/nn.py":242:13),
                      %h0.attn.bv: tensor<8x16xf32> {par.name = "h0.attn.bv", par.init = "zeros", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}]>} loc("python_frontend/par/nn.py":246:13),
                      %h0.attn.wo: tensor<8x16x128xf32> {par.name = "h0.attn.wo", par.init = "normal(0.01)", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}, {}]>} loc("python_frontend/par/nn.py":263:14),
                      %h0.attn.bo: tensor<128xf32> {par.name = "h0.attn.bo", par.init = "zeros"} loc("python_frontend/par/nn.py":267:18),
                      %h0.ln2.g: tensor<128xf32> {par.name = "h0.ln2.g", par.init = "ones"} loc("python_frontend/par/nn.py":112:13),
                      %h0.ln2.b: tensor<128xf32> {par.name = "h0.ln2.b", par.init = "zeros"} loc("python_frontend/par/nn.py":113:13),
                      %h0.mlp.w_up: tensor<128x512xf32> {par.name = "h0.mlp.w_up", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"a", "b"}]>} loc("python_frontend/par/nn.py":150:16),
                      %h0.mlp.b_up: tensor<512xf32> {par.name = "h0.mlp.b_up", par.init = "zeros", par.sharding = #par.sharding<@mesh, [{"a", "b"}]>} loc("python_frontend/par/nn.py":153:20),
                      %h0.mlp.w_down: tensor<512x128xf32> {par.name = "h0.mlp.w_down", par.init = "normal(0.01)", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}]>} loc("python_frontend/par/nn.py":156:18),
                      %h0.mlp.b_down: tensor<128xf32> {par.name = "h0.mlp.b_down", par.init = "zeros"} loc("python_frontend/par/nn.py":159:22),
                      %h1.ln1.g: tensor<128xf32> {par.name = "h1.ln1.g", par.init = "ones"} loc("python_frontend/par/nn.py":112:13),
                      %h1.ln1.b: tensor<128xf32> {par.name = "h1.ln1.b", par.init = "zeros"} loc("python_frontend/par/nn.py":113:13),
                      %h1.attn.wq: tensor<128x8x16xf32> {par.name = "h1.attn.wq", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"a", "b"}, {}]>} loc("python_frontend/par/nn.py":242:13),
                      %h1.attn.bq: tensor<8x16xf32> {par.name = "h1.attn.bq", par.init = "zeros", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}]>} loc("python_frontend/par/nn.py":246:13),
                      %h1.attn.wk: tensor<128x8x16xf32> {par.name = "h1.attn.wk", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"a", "b"}, {}]>} loc("python_frontend/par/nn.py":242:13),
                      %h1.attn.bk: tensor<8x16xf32> {par.name = "h1.attn.bk", par.init = "zeros", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}]>} loc("python_frontend/par/nn.py":246:13),
                      %h1.attn.wv: tensor<128x8x16xf32> {par.name = "h1.attn.wv", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"a", "b"}, {}]>} loc("python_frontend/par/nn.py":242:13),
                      %h1.attn.bv: tensor<8x16xf32> {par.name = "h1.attn.bv", par.init = "zeros", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}]>} loc("python_frontend/par/nn.py":246:13),
                      %h1.attn.wo: tensor<8x16x128xf32> {par.name = "h1.attn.wo", par.init = "normal(0.01)", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}, {}]>} loc("python_frontend/par/nn.py":263:14),
                      %h1.attn.bo: tensor<128xf32> {par.name = "h1.attn.bo", par.init = "zeros"} loc("python_frontend/par/nn.py":267:18),
                      %h1.ln2.g: tensor<128xf32> {par.name = "h1.ln2.g", par.init = "ones"} loc("python_frontend/par/nn.py":112:13),
                      %h1.ln2.b: tensor<128xf32> {par.name = "h1.ln2.b", par.init = "zeros"} loc("python_frontend/par/nn.py":113:13),
                      %h1.mlp.w_up: tensor<128x512xf32> {par.name = "h1.mlp.w_up", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"a", "b"}]>} loc("python_frontend/par/nn.py":150:16),
                      %h1.mlp.b_up: tensor<512xf32> {par.name = "h1.mlp.b_up", par.init = "zeros", par.sharding = #par.sharding<@mesh, [{"a", "b"}]>} loc("python_frontend/par/nn.py":153:20),
                      %h1.mlp.w_down: tensor<512x128xf32> {par.name = "h1.mlp.w_down", par.init = "normal(0.01)", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {}]>} loc("python_frontend/par/nn.py":156:18),
                      %h1.mlp.b_down: tensor<128xf32> {par.name = "h1.mlp.b_down", par.init = "zeros"} loc("python_frontend/par/nn.py":159:22),
                      %ln_f.g: tensor<128xf32> {par.name = "ln_f.g", par.init = "ones"} loc("python_frontend/par/nn.py":112:13),
                      %ln_f.b: tensor<128xf32> {par.name = "ln_f.b", par.init = "zeros"} loc("python_frontend/par/nn.py":113:13))
    -> (tensor<f32> {par.name = "loss"}) {
  %wte.x = "par.embedding"(%wte, %tokens) : (tensor<256x128xf32>, tensor<8x64xi32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":97:16)
  %0 = "par.broadcast"(%wpe) <{dims = array<i64: 1, 2>}> : (tensor<64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/models.py":166:24)
  %x0 = "par.add"(%wte.x, %0) : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/models.py":166:13)
  %h0.ln1.y = "par.layer_norm"(%x0, %h0.ln1.g, %h0.ln1.b) {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":114:16)
  %h0.attn.q0 = "par.dot"(%h0.ln1.y, %h0.attn.wq) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<128x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":245:13)
  %1 = "par.broadcast"(%h0.attn.bq) <{dims = array<i64: 2, 3>}> {par.layer = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:27)
  %h0.attn.q = "par.add"(%h0.attn.q0, %1) {par.layer = 0 : i64} : (tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:16)
  %h0.attn.k0 = "par.dot"(%h0.ln1.y, %h0.attn.wk) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<128x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":245:13)
  %2 = "par.broadcast"(%h0.attn.bk) <{dims = array<i64: 2, 3>}> {par.layer = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:27)
  %h0.attn.k = "par.add"(%h0.attn.k0, %2) {par.layer = 0 : i64} : (tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:16)
  %h0.attn.v0 = "par.dot"(%h0.ln1.y, %h0.attn.wv) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<128x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":245:13)
  %3 = "par.broadcast"(%h0.attn.bv) <{dims = array<i64: 2, 3>}> {par.layer = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:27)
  %h0.attn.v = "par.add"(%h0.attn.v0, %3) {par.layer = 0 : i64} : (tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:16)
  %h0.attn.a = "par.attention"(%h0.attn.q, %h0.attn.k, %h0.attn.v) <{causal}> {par.layer = 0 : i64} : (tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":260:17)
  %h0.attn.o = "par.dot"(%h0.attn.a, %h0.attn.wo) <{lhs_contract = array<i64: 2, 3>, rhs_contract = array<i64: 0, 1>}> {par.layer = 0 : i64} : (tensor<8x64x8x16xf32>, tensor<8x16x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":265:13)
  %4 = "par.broadcast"(%h0.attn.bo) <{dims = array<i64: 2>}> {par.layer = 0 : i64} : (tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":268:28)
  %5 = "par.add"(%h0.attn.o, %4) {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":268:17)
  %h0.x1 = "par.add"(%x0, %5) {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":292:13)
  %h0.ln2.y = "par.layer_norm"(%h0.x1, %h0.ln2.g, %h0.ln2.b) {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":114:16)
  %h0.mlp.up = "par.dot"(%h0.ln2.y, %h0.mlp.w_up) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<128x512xf32>) -> tensor<8x64x512xf32> loc("python_frontend/par/nn.py":151:13)
  %6 = "par.broadcast"(%h0.mlp.b_up) <{dims = array<i64: 2>}> {par.layer = 0 : i64} : (tensor<512xf32>) -> tensor<8x64x512xf32> loc("python_frontend/par/nn.py":154:28)
  %7 = "par.add"(%h0.mlp.up, %6) {par.layer = 0 : i64} : (tensor<8x64x512xf32>, tensor<8x64x512xf32>) -> tensor<8x64x512xf32> loc("python_frontend/par/nn.py":154:17)
  %h0.mlp.gelu = "par.gelu"(%7) {par.layer = 0 : i64} : (tensor<8x64x512xf32>) -> tensor<8x64x512xf32> loc("python_frontend/par/nn.py":155:13)
  %h0.mlp.down = "par.dot"(%h0.mlp.gelu, %h0.mlp.w_down) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x512xf32>, tensor<512x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":157:13)
  %8 = "par.broadcast"(%h0.mlp.b_down) <{dims = array<i64: 2>}> {par.layer = 0 : i64} : (tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":160:28)
  %9 = "par.add"(%h0.mlp.down, %8) {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":160:17)
  %h0.x2 = "par.add"(%h0.x1, %9) {par.layer = 0 : i64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":293:16)
  %h1.ln1.y = "par.layer_norm"(%h0.x2, %h1.ln1.g, %h1.ln1.b) {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":114:16)
  %h1.attn.q0 = "par.dot"(%h1.ln1.y, %h1.attn.wq) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<128x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":245:13)
  %10 = "par.broadcast"(%h1.attn.bq) <{dims = array<i64: 2, 3>}> {par.layer = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:27)
  %h1.attn.q = "par.add"(%h1.attn.q0, %10) {par.layer = 1 : i64} : (tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:16)
  %h1.attn.k0 = "par.dot"(%h1.ln1.y, %h1.attn.wk) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<128x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":245:13)
  %11 = "par.broadcast"(%h1.attn.bk) <{dims = array<i64: 2, 3>}> {par.layer = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:27)
  %h1.attn.k = "par.add"(%h1.attn.k0, %11) {par.layer = 1 : i64} : (tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:16)
  %h1.attn.v0 = "par.dot"(%h1.ln1.y, %h1.attn.wv) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<128x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":245:13)
  %12 = "par.broadcast"(%h1.attn.bv) <{dims = array<i64: 2, 3>}> {par.layer = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:27)
  %h1.attn.v = "par.add"(%h1.attn.v0, %12) {par.layer = 1 : i64} : (tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":247:16)
  %h1.attn.a = "par.attention"(%h1.attn.q, %h1.attn.k, %h1.attn.v) <{causal}> {par.layer = 1 : i64} : (tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":260:17)
  %h1.attn.o = "par.dot"(%h1.attn.a, %h1.attn.wo) <{lhs_contract = array<i64: 2, 3>, rhs_contract = array<i64: 0, 1>}> {par.layer = 1 : i64} : (tensor<8x64x8x16xf32>, tensor<8x16x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":265:13)
  %13 = "par.broadcast"(%h1.attn.bo) <{dims = array<i64: 2>}> {par.layer = 1 : i64} : (tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":268:28)
  %14 = "par.add"(%h1.attn.o, %13) {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":268:17)
  %h1.x1 = "par.add"(%h0.x2, %14) {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":292:13)
  %h1.ln2.y = "par.layer_norm"(%h1.x1, %h1.ln2.g, %h1.ln2.b) {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":114:16)
  %h1.mlp.up = "par.dot"(%h1.ln2.y, %h1.mlp.w_up) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<128x512xf32>) -> tensor<8x64x512xf32> loc("python_frontend/par/nn.py":151:13)
  %15 = "par.broadcast"(%h1.mlp.b_up) <{dims = array<i64: 2>}> {par.layer = 1 : i64} : (tensor<512xf32>) -> tensor<8x64x512xf32> loc("python_frontend/par/nn.py":154:28)
  %16 = "par.add"(%h1.mlp.up, %15) {par.layer = 1 : i64} : (tensor<8x64x512xf32>, tensor<8x64x512xf32>) -> tensor<8x64x512xf32> loc("python_frontend/par/nn.py":154:17)
  %h1.mlp.gelu = "par.gelu"(%16) {par.layer = 1 : i64} : (tensor<8x64x512xf32>) -> tensor<8x64x512xf32> loc("python_frontend/par/nn.py":155:13)
  %h1.mlp.down = "par.dot"(%h1.mlp.gelu, %h1.mlp.w_down) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x512xf32>, tensor<512x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":157:13)
  %17 = "par.broadcast"(%h1.mlp.b_down) <{dims = array<i64: 2>}> {par.layer = 1 : i64} : (tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":160:28)
  %18 = "par.add"(%h1.mlp.down, %17) {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":160:17)
  %h1.x2 = "par.add"(%h1.x1, %18) {par.layer = 1 : i64} : (tensor<8x64x128xf32>, tensor<8x64x128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":293:16)
  %ln_f.y = "par.layer_norm"(%h1.x2, %ln_f.g, %ln_f.b) : (tensor<8x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<8x64x128xf32> loc("python_frontend/par/nn.py":114:16)
  %logits = "par.dot"(%ln_f.y, %wte) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 1>}> : (tensor<8x64x128xf32>, tensor<256x128xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":102:16)
  %loss = "par.cross_entropy"(%logits, %targets) : (tensor<8x64x256xf32>, tensor<8x64xi32>) -> tensor<f32> loc("python_frontend/par/models.py":241:12)
  return %loss : tensor<f32> loc("python_frontend/par/models.py":242:5)
} loc("python_frontend/par/models.py":236:9)
