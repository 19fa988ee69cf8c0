// Reshards between fixed pairs of layouts of a rank-3 tensor (the exchange
// of the reshard planner and its collective sequences): each argument is
// laid out as its SHARDING line says and returned (negated) in another
// layout; every output must equal the one-rank run.
// SHARDING: a=2,b=2,c=2 | %x0=[{"a", "b"}, {}, {}] %x1=[{"a", "b"}, {}, {}] %x2=[{"a"}, {}, {}] %x3=[{"a", "b", "c"}, {}, {}] %x4=[{"a"}, {"b"}, {}] %x5=[{"b", "c", "a"}, {}, {}] %x6=[{}, {"a"}, {}] %x7=[{"b"}, {"c"}, {}] %x8=[{}, {"c", "b"}, {}] %x9=[{}, {"b", "a"}, {"c"}] %x10=[{"a", "b"}, {}, {}] %x11=[{"b"}, {"a"}, {}] %x12=[{}, {"b", "c", "a"}, {}] %x13=[{"a"}, {}, {"c", "b"}] %x14=[{"b", "c"}, {}, {}] %x15=[{}, {"c", "a"}, {}] %x16=[{"a", "b"}, {"c"}, {}] %x17=[{"b", "a", "c"}, {}, {}] %x18=[{"b"}, {"a"}, {"c"}] %x19=[{"c"}, {"a"}, {}] %x20=[{"a"}, {}, {"b"}] %x21=[{}, {}, {"a", "b", "c"}] %x22=[{}, {"b", "c"}, {}] %x23=[{}, {"c"}, {"a", "b"}] %x24=[{"b"}, {"c"}, {}] %x25=[{}, {}, {"c", "a", "b"}] %x26=[{"b"}, {"a"}, {"c"}] %x27=[{}, {"a"}, {"b", "c"}]
// SHARDING: a=2,b=4,c=1 | %x0=[{"a", "b"}, {}, {}] %x1=[{"a", "b"}, {}, {}] %x2=[{"a"}, {}, {}] %x3=[{"a", "b", "c"}, {}, {}] %x4=[{"a"}, {"b"}, {}] %x5=[{"b", "c", "a"}, {}, {}] %x6=[{}, {"a"}, {}] %x7=[{"b"}, {"c"}, {}] %x8=[{}, {"c", "b"}, {}] %x9=[{}, {"b", "a"}, {"c"}] %x10=[{"a", "b"}, {}, {}] %x11=[{"b"}, {"a"}, {}] %x12=[{}, {"b", "c", "a"}, {}] %x13=[{"a"}, {}, {"c", "b"}] %x14=[{"b", "c"}, {}, {}] %x15=[{}, {"c", "a"}, {}] %x16=[{"a", "b"}, {"c"}, {}] %x17=[{"b", "a", "c"}, {}, {}] %x18=[{"b"}, {"a"}, {"c"}] %x19=[{"c"}, {"a"}, {}] %x20=[{"a"}, {}, {"b"}] %x21=[{}, {}, {"a", "b", "c"}] %x22=[{}, {"b", "c"}, {}] %x23=[{}, {"c"}, {"a", "b"}] %x24=[{"b"}, {"c"}, {}] %x25=[{}, {}, {"c", "a", "b"}] %x26=[{"b"}, {"a"}, {"c"}] %x27=[{}, {"a"}, {"b", "c"}]
par.mesh @mesh <["a"=2, "b"=2, "c"=2]>
func.func @reshards(
    %x0: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x1: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x2: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x3: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x4: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x5: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x6: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x7: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x8: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x9: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x10: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x11: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x12: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x13: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x14: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x15: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x16: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x17: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x18: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x19: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x20: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x21: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x22: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x23: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x24: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x25: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x26: tensor<8x8x8xf32> {par.role = "data", par.data = "random"},
    %x27: tensor<8x8x8xf32> {par.role = "data", par.data = "random"})
    -> (tensor<8x8x8xf32> {par.name = "y0", par.sharding = #par.sharding<@mesh, [{}, {}, {"b", "a"}]>}, tensor<8x8x8xf32> {par.name = "y1", par.sharding = #par.sharding<@mesh, [{}, {"a"}, {}]>}, tensor<8x8x8xf32> {par.name = "y2", par.sharding = #par.sharding<@mesh, [{}, {"a"}, {}]>}, tensor<8x8x8xf32> {par.name = "y3", par.sharding = #par.sharding<@mesh, [{}, {"c", "b", "a"}, {}]>}, tensor<8x8x8xf32> {par.name = "y4", par.sharding = #par.sharding<@mesh, [{"b"}, {"a", "c"}, {}]>}, tensor<8x8x8xf32> {par.name = "y5", par.sharding = #par.sharding<@mesh, [{}, {}, {"c", "a", "b"}]>}, tensor<8x8x8xf32> {par.name = "y6", par.sharding = #par.sharding<@mesh, [{"a"}, {}, {"b"}]>}, tensor<8x8x8xf32> {par.name = "y7", par.sharding = #par.sharding<@mesh, [{"a"}, {"c", "b"}, {}]>}, tensor<8x8x8xf32> {par.name = "y8", par.sharding = #par.sharding<@mesh, [{}, {"c"}, {"a"}]>}, tensor<8x8x8xf32> {par.name = "y9", par.sharding = #par.sharding<@mesh, [{}, {}, {"b"}]>}, tensor<8x8x8xf32> {par.name = "y10", par.sharding = #par.sharding<@mesh, [{"b", "c"}, {"a"}, {}]>}, tensor<8x8x8xf32> {par.name = "y11", par.sharding = #par.sharding<@mesh, [{"a", "b"}, {"c"}, {}]>}, tensor<8x8x8xf32> {par.name = "y12", par.sharding = #par.sharding<@mesh, [{}, {}, {"b", "a", "c"}]>}, tensor<8x8x8xf32> {par.name = "y13", par.sharding = #par.sharding<@mesh, [{"c"}, {}, {"a", "b"}]>}, tensor<8x8x8xf32> {par.name = "y14", par.sharding = #par.sharding<@mesh, [{}, {"b", "c"}, {}]>}, tensor<8x8x8xf32> {par.name = "y15", par.sharding = #par.sharding<@mesh, [{"b"}, {}, {"c"}]>}, tensor<8x8x8xf32> {par.name = "y16", par.sharding = #par.sharding<@mesh, [{}, {"c"}, {"b", "a"}]>}, tensor<8x8x8xf32> {par.name = "y17", par.sharding = #par.sharding<@mesh, [{}, {}, {"a", "c", "b"}]>}, tensor<8x8x8xf32> {par.name = "y18", par.sharding = #par.sharding<@mesh, [{}, {"b", "a", "c"}, {}]>}, tensor<8x8x8xf32> {par.name = "y19", par.sharding = #par.sharding<@mesh, [{"a", "c"}, {}, {}]>}, tensor<8x8x8xf32> {par.name = "y20", par.sharding = #par.sharding<@mesh, [{"a"}, {"b", "c"}, {}]>}, tensor<8x8x8xf32> {par.name = "y21", par.sharding = #par.sharding<@mesh, [{}, {"b"}, {"a", "c"}]>}, tensor<8x8x8xf32> {par.name = "y22", par.sharding = #par.sharding<@mesh, [{}, {}, {"b", "c"}]>}, tensor<8x8x8xf32> {par.name = "y23", par.sharding = #par.sharding<@mesh, [{"b", "a"}, {"c"}, {}]>}, tensor<8x8x8xf32> {par.name = "y24", par.sharding = #par.sharding<@mesh, [{}, {"c", "a", "b"}, {}]>}, tensor<8x8x8xf32> {par.name = "y25", par.sharding = #par.sharding<@mesh, [{}, {"c", "b", "a"}, {}]>}, tensor<8x8x8xf32> {par.name = "y26", par.sharding = #par.sharding<@mesh, [{"a"}, {}, {"b"}]>}, tensor<8x8x8xf32> {par.name = "y27", par.sharding = #par.sharding<@mesh, [{}, {"b", "a", "c"}, {}]>}) {
  %y0 = par.neg %x0 : tensor<8x8x8xf32>
  %y1 = par.neg %x1 : tensor<8x8x8xf32>
  %y2 = par.neg %x2 : tensor<8x8x8xf32>
  %y3 = par.neg %x3 : tensor<8x8x8xf32>
  %y4 = par.neg %x4 : tensor<8x8x8xf32>
  %y5 = par.neg %x5 : tensor<8x8x8xf32>
  %y6 = par.neg %x6 : tensor<8x8x8xf32>
  %y7 = par.neg %x7 : tensor<8x8x8xf32>
  %y8 = par.neg %x8 : tensor<8x8x8xf32>
  %y9 = par.neg %x9 : tensor<8x8x8xf32>
  %y10 = par.neg %x10 : tensor<8x8x8xf32>
  %y11 = par.neg %x11 : tensor<8x8x8xf32>
  %y12 = par.neg %x12 : tensor<8x8x8xf32>
  %y13 = par.neg %x13 : tensor<8x8x8xf32>
  %y14 = par.neg %x14 : tensor<8x8x8xf32>
  %y15 = par.neg %x15 : tensor<8x8x8xf32>
  %y16 = par.neg %x16 : tensor<8x8x8xf32>
  %y17 = par.neg %x17 : tensor<8x8x8xf32>
  %y18 = par.neg %x18 : tensor<8x8x8xf32>
  %y19 = par.neg %x19 : tensor<8x8x8xf32>
  %y20 = par.neg %x20 : tensor<8x8x8xf32>
  %y21 = par.neg %x21 : tensor<8x8x8xf32>
  %y22 = par.neg %x22 : tensor<8x8x8xf32>
  %y23 = par.neg %x23 : tensor<8x8x8xf32>
  %y24 = par.neg %x24 : tensor<8x8x8xf32>
  %y25 = par.neg %x25 : tensor<8x8x8xf32>
  %y26 = par.neg %x26 : tensor<8x8x8xf32>
  %y27 = par.neg %x27 : tensor<8x8x8xf32>
  return %y0, %y1, %y2, %y3, %y4, %y5, %y6, %y7, %y8, %y9, %y10, %y11, %y12, %y13, %y14, %y15, %y16, %y17, %y18, %y19, %y20, %y21, %y22, %y23, %y24, %y25, %y26, %y27 : tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>, tensor<8x8x8xf32>
}
