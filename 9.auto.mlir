par.mesh @mesh <["x"=4]>
func.func @llama(%tokens: tensor<8x64xi32> {par.name = "tokens", par.data = "tokens", par.vocab = 256} loc("python_frontend/par/models.py":237:14),
                 %targets: tensor<8x64xi32> {par.name = "targets", par.data = "targets", par.vocab = 256} loc("python_frontend/par/models.py":238:15),
                 %wte: tensor<256x256xf32> {par.name = "wte", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":92:16),
                 %layers.0.attn_norm.g: tensor<256xf32> {par.name = "layers.0.attn_norm.g", par.init = "ones"} loc("python_frontend/par/nn.py":124:13),
                 %layers.0.attn.wq: tensor<256x16x16xf32> {par.name = "layers.0.attn.wq", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":242:13),
                 %layers.0.attn.wk: tensor<256x8x16xf32> {par.name = "layers.0.attn.wk", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":242:13),
                 %layers.0.attn.wv: tensor<256x8x16xf32> {par.name = "layers.0.attn.wv", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":242:13),
                 %layers.0.attn.wo: tensor<16x16x256xf32> {par.name = "layers.0.attn.wo", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":263:14),
                 %layers.0.mlp_norm.g: tensor<256xf32> {par.name = "layers.0.mlp_norm.g", par.init = "ones"} loc("python_frontend/par/nn.py":124:13),
                 %layers.0.mlp.w_gate: tensor<256x1024xf32> {par.name = "layers.0.mlp.w_gate", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":176:18),
                 %layers.0.mlp.w_up: tensor<256x1024xf32> {par.name = "layers.0.mlp.w_up", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":177:16),
                 %layers.0.mlp.w_down: tensor<1024x256xf32> {par.name = "layers.0.mlp.w_down", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":178:18),
                 %layers.1.attn_norm.g: tensor<256xf32> {par.name = "layers.1.attn_norm.g", par.init = "ones"} loc("python_frontend/par/nn.py":124:13),
                 %layers.1.attn.wq: tensor<256x16x16xf32> {par.name = "layers.1.attn.wq", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":242:13),
                 %layers.1.attn.wk: tensor<256x8x16xf32> {par.name = "layers.1.attn.wk", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":242:13),
                 %layers.1.attn.wv: tensor<256x8x16xf32> {par.name = "layers.1.attn.wv", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":242:13),
                 %layers.1.attn.wo: tensor<16x16x256xf32> {par.name = "layers.1.attn.wo", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":263:14),
                 %layers.1.mlp_norm.g: tensor<256xf32> {par.name = "layers.1.mlp_norm.g", par.init = "ones"} loc("python_frontend/par/nn.py":124:13),
                 %layers.1.mlp.w_gate: tensor<256x1024xf32> {par.name = "layers.1.mlp.w_gate", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":176:18),
                 %layers.1.mlp.w_up: tensor<256x1024xf32> {par.name = "layers.1.mlp.w_up", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":177:16),
                 %layers.1.mlp.w_down: tensor<1024x256xf32> {par.name = "layers.1.mlp.w_down", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":178:18),
                 %norm.g: tensor<256xf32> {par.name = "norm.g", par.init = "ones"} loc("python_frontend/par/nn.py":124:13),
                 %lm_head.w: tensor<256x256xf32> {par.name = "lm_head.w", par.init = "normal(0.02)"} loc("python_frontend/par/nn.py":75:13))
    -> (tensor<f32> {par.name = "loss"}) {
  %wte.x = "par.embedding"(%wte, %tokens) : (tensor<256x256xf32>, tensor<8x64xi32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":97:16)
  %layers.0.attn_norm.y = "par.rms_norm"(%wte.x, %layers.0.attn_norm.g) <{epsilon = 1.0e-05 : f32}> {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":125:16)
  %layers.0.attn.q = "par.dot"(%layers.0.attn_norm.y, %layers.0.attn.wq) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<256x16x16xf32>) -> tensor<8x64x16x16xf32> loc("python_frontend/par/nn.py":244:20)
  %layers.0.attn.k = "par.dot"(%layers.0.attn_norm.y, %layers.0.attn.wk) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<256x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":244:20)
  %layers.0.attn.v = "par.dot"(%layers.0.attn_norm.y, %layers.0.attn.wv) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<256x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":244:20)
  %layers.0.attn.q_rope = "par.rope"(%layers.0.attn.q) {par.layer = 0 : i64} : (tensor<8x64x16x16xf32>) -> tensor<8x64x16x16xf32> loc("python_frontend/par/nn.py":257:17)
  %layers.0.attn.k_rope = "par.rope"(%layers.0.attn.k) {par.layer = 0 : i64} : (tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":258:17)
  %layers.0.attn.a = "par.attention"(%layers.0.attn.q_rope, %layers.0.attn.k_rope, %layers.0.attn.v) <{causal}> {par.layer = 0 : i64} : (tensor<8x64x16x16xf32>, tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x16x16xf32> loc("python_frontend/par/nn.py":260:17)
  %layers.0.attn.o = "par.dot"(%layers.0.attn.a, %layers.0.attn.wo) <{lhs_contract = array<i64: 2, 3>, rhs_contract = array<i64: 0, 1>}> {par.layer = 0 : i64} : (tensor<8x64x16x16xf32>, tensor<16x16x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":265:13)
  %layers.0.x1 = "par.add"(%wte.x, %layers.0.attn.o) {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<8x64x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":311:13)
  %layers.0.mlp_norm.y = "par.rms_norm"(%layers.0.x1, %layers.0.mlp_norm.g) <{epsilon = 1.0e-05 : f32}> {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":125:16)
  %layers.0.mlp.gate = "par.dot"(%layers.0.mlp_norm.y, %layers.0.mlp.w_gate) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<256x1024xf32>) -> tensor<8x64x1024xf32> loc("python_frontend/par/nn.py":180:25)
  %layers.0.mlp.silu = "par.silu"(%layers.0.mlp.gate) {par.layer = 0 : i64} : (tensor<8x64x1024xf32>) -> tensor<8x64x1024xf32> loc("python_frontend/par/nn.py":180:16)
  %layers.0.mlp.up = "par.dot"(%layers.0.mlp_norm.y, %layers.0.mlp.w_up) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<256x1024xf32>) -> tensor<8x64x1024xf32> loc("python_frontend/par/nn.py":182:14)
  %layers.0.mlp.h = "par.mul"(%layers.0.mlp.silu, %layers.0.mlp.up) {par.layer = 0 : i64} : (tensor<8x64x1024xf32>, tensor<8x64x1024xf32>) -> tensor<8x64x1024xf32> loc("python_frontend/par/nn.py":183:13)
  %layers.0.mlp.down = "par.dot"(%layers.0.mlp.h, %layers.0.mlp.w_down) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 0 : i64} : (tensor<8x64x1024xf32>, tensor<1024x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":184:16)
  %layers.0.x2 = "par.add"(%layers.0.x1, %layers.0.mlp.down) {par.layer = 0 : i64} : (tensor<8x64x256xf32>, tensor<8x64x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":312:16)
  %layers.1.attn_norm.y = "par.rms_norm"(%layers.0.x2, %layers.1.attn_norm.g) <{epsilon = 1.0e-05 : f32}> {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":125:16)
  %layers.1.attn.q = "par.dot"(%layers.1.attn_norm.y, %layers.1.attn.wq) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<256x16x16xf32>) -> tensor<8x64x16x16xf32> loc("python_frontend/par/nn.py":244:20)
  %layers.1.attn.k = "par.dot"(%layers.1.attn_norm.y, %layers.1.attn.wk) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<256x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":244:20)
  %layers.1.attn.v = "par.dot"(%layers.1.attn_norm.y, %layers.1.attn.wv) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<256x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":244:20)
  %layers.1.attn.q_rope = "par.rope"(%layers.1.attn.q) {par.layer = 1 : i64} : (tensor<8x64x16x16xf32>) -> tensor<8x64x16x16xf32> loc("python_frontend/par/nn.py":257:17)
  %layers.1.attn.k_rope = "par.rope"(%layers.1.attn.k) {par.layer = 1 : i64} : (tensor<8x64x8x16xf32>) -> tensor<8x64x8x16xf32> loc("python_frontend/par/nn.py":258:17)
  %layers.1.attn.a = "par.attention"(%layers.1.attn.q_rope, %layers.1.attn.k_rope, %layers.1.attn.v) <{causal}> {par.layer = 1 : i64} : (tensor<8x64x16x16xf32>, tensor<8x64x8x16xf32>, tensor<8x64x8x16xf32>) -> tensor<8x64x16x16xf32> loc("python_frontend/par/nn.py":260:17)
  %layers.1.attn.o = "par.dot"(%layers.1.attn.a, %layers.1.attn.wo) <{lhs_contract = array<i64: 2, 3>, rhs_contract = array<i64: 0, 1>}> {par.layer = 1 : i64} : (tensor<8x64x16x16xf32>, tensor<16x16x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":265:13)
  %layers.1.x1 = "par.add"(%layers.0.x2, %layers.1.attn.o) {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<8x64x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":311:13)
  %layers.1.mlp_norm.y = "par.rms_norm"(%layers.1.x1, %layers.1.mlp_norm.g) <{epsilon = 1.0e-05 : f32}> {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":125:16)
  %layers.1.mlp.gate = "par.dot"(%layers.1.mlp_norm.y, %layers.1.mlp.w_gate) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<256x1024xf32>) -> tensor<8x64x1024xf32> loc("python_frontend/par/nn.py":180:25)
  %layers.1.mlp.silu = "par.silu"(%layers.1.mlp.gate) {par.layer = 1 : i64} : (tensor<8x64x1024xf32>) -> tensor<8x64x1024xf32> loc("python_frontend/par/nn.py":180:16)
  %layers.1.mlp.up = "par.dot"(%layers.1.mlp_norm.y, %layers.1.mlp.w_up) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<256x1024xf32>) -> tensor<8x64x1024xf32> loc("python_frontend/par/nn.py":182:14)
  %layers.1.mlp.h = "par.mul"(%layers.1.mlp.silu, %layers.1.mlp.up) {par.layer = 1 : i64} : (tensor<8x64x1024xf32>, tensor<8x64x1024xf32>) -> tensor<8x64x1024xf32> loc("python_frontend/par/nn.py":183:13)
  %layers.1.mlp.down = "par.dot"(%layers.1.mlp.h, %layers.1.mlp.w_down) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> {par.layer = 1 : i64} : (tensor<8x64x1024xf32>, tensor<1024x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":184:16)
  %layers.1.x2 = "par.add"(%layers.1.x1, %layers.1.mlp.down) {par.layer = 1 : i64} : (tensor<8x64x256xf32>, tensor<8x64x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":312:16)
  %norm.y = "par.rms_norm"(%layers.1.x2, %norm.g) <{epsilon = 1.0e-05 : f32}> : (tensor<8x64x256xf32>, tensor<256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":125:16)
  %lm_head.y = "par.dot"(%norm.y, %lm_head.w) <{lhs_contract = array<i64: 2>, rhs_contract = array<i64: 0>}> : (tensor<8x64x256xf32>, tensor<256x256xf32>) -> tensor<8x64x256xf32> loc("python_frontend/par/nn.py":76:13)
  %loss = "par.cross_entropy"(%lm_head.y, %targets) : (tensor<8x64x256xf32>, tensor<8x64xi32>) -> tensor<f32> loc("python_frontend/par/models.py":241:12)
  return %loss : tensor<f32> loc("python_frontend/par/models.py":242:5)
} loc("python_frontend/par/models.py":236:9)
