// RUN: par-opt %s -split-input-file -verify-diagnostics --par-pipeline="microbatches=2 divide-batch"

// Steps written with their phase marks by hand. A divided batch's
// micro-batches must each make a share of the step that adds up to it.

// The micro-batches must divide the batch.
par.mesh @mesh <["pp"=2]>
// expected-error @+1 {{--par-pipeline: microbatches=2 does not divide the batch of 3 rows (data argument #0, 'tensor<3x8xf32>')}}
func.func @odd(%x: tensor<3x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<3x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<3x8xf32>
  return %l : tensor<f32>
}

// -----

// Data arguments disagree on the batch.
par.mesh @mesh <["pp"=2]>
// expected-error @+1 {{--par-pipeline divide-batch: data argument #1 has 2 rows but argument #0 has 4: the data arguments' first dimensions are the batch}}
func.func @rows(%x: tensor<4x8xf32> {par.role = "data"}, %t: tensor<2x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %t, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<2x8xf32>) -> tensor<f32>
  %g = par.neg %h {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// A max over the batch does not add up.
par.mesh @mesh <["pp"=2]>
func.func @max(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{--par-pipeline divide-batch: 'par.reduce' reduces over the batch with max (only sums and means add up), so the step cannot be divided into micro-batches whose shares add up to it}}
  %l = par.reduce max %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// A share squared is not the square's share.
par.mesh @mesh <["pp"=2]>
func.func @square(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %m = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  // expected-error @+1 {{--par-pipeline divide-batch: 'par.mul' reads the result of 'par.reduce', a share of a sum over the batch, and is not linear in it}}
  %l = par.mul %m, %m {par.phase = #par.phase<forward>} : tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// A statistic over the batch spread back over it (batch normalization).
par.mesh @mesh <["pp"=2]>
func.func @spread(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %mu = par.reduce mean %h dims [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<8xf32>
  // expected-error @+1 {{--par-pipeline divide-batch: 'par.broadcast' spreads the result of 'par.reduce', a share of a sum over the batch, back over the batch}}
  %b = par.broadcast %mu dims [1] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<8xf32>) -> tensor<4x8xf32>
  %c = par.sub %h, %b {par.layer = 0, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %y = par.dot %c, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// A per-row value cannot leave the passes.
par.mesh @mesh <["pp"=2]>
func.func @rows_out(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  // expected-error @+1 {{--par-pipeline divide-batch: 'func.return' reads a value with the batch dimension outside the forward and backward passes; only sums and means over the batch can be accumulated over micro-batches}}
  return %l, %y : tensor<f32>, tensor<4x8xf32>
}

// -----

// A softmax over the batch needs every row at once.
par.mesh @mesh <["pp"=2]>
func.func @softmax(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{--par-pipeline divide-batch: 'par.softmax' needs every row of the batch at once (its sharding rule cannot split the batch), so the step cannot run in micro-batches}}
  %s = par.softmax %h dim 0 {par.layer = 0, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %y = par.dot %s, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// A slice of some rows.
par.mesh @mesh <["pp"=2]>
func.func @rows_slice(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{needs every row of the batch at once}}
  %s = par.slice %h starts [0, 0] limits [2, 8] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<2x8xf32>
  %y = par.dot %s, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<2x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<2x8xf32>
  return %l : tensor<f32>
}

// -----

// A gather of rows of the batch by their number (rows 0-2 of the whole
// batch are not rows 0-2 of every micro-batch).
par.mesh @mesh <["pp"=2]>
func.func @gather_rows(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %i = par.constant {par.phase = #par.phase<forward>} dense<[[0], [1], [2]]> : tensor<3x1xi32>
  // expected-error @+1 {{--par-pipeline divide-batch: 'par.gather' indexes into the batch dimension by row number, which a micro-batch holds only some of}}
  %g = par.gather %h[%i] dims [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<3x1xi32>) -> tensor<3x8xf32>
  %y = par.dot %g, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<3x8xf32>) -> tensor<f32>
  %n = par.neg %y {par.phase = #par.phase<backward>} : tensor<3x8xf32>
  return %l : tensor<f32>
}

// -----

// The data read by the optimizer, which runs once per step.
par.mesh @mesh <["pp"=2]>
func.func @data_in_update(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  // expected-error @+1 {{--par-pipeline divide-batch: 'par.neg' reads data argument #0 outside the forward and backward passes, which run once per micro-batch}}
  %u = par.neg %x {par.phase = #par.phase<optimizer>} : tensor<4x8xf32>
  return %l, %u : tensor<f32>, tensor<4x8xf32>
}

// -----

// A weight added to the activations row by row would be divided too.
par.mesh @mesh <["pp"=2]>
func.func @param_rows(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %b: tensor<4x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{--par-pipeline divide-batch: the batch reaches argument #2, which is not a data argument (a parameter or optimizer state cannot be divided into micro-batches)}}
  %y = par.add %h, %b {par.layer = 1, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// A constant that differs from row to row.
par.mesh @mesh <["pp"=2]>
func.func @row_constant(%x: tensor<4x2xf32> {par.role = "data"}, %w1: tensor<2x2xf32>, %w2: tensor<2x2xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  // expected-error @+1 {{--par-pipeline divide-batch: 'par.constant' is a constant that differs along the batch, so the step cannot be divided into micro-batches whose shares add up to it}}
  %c = par.constant {par.phase = #par.phase<forward>} dense<[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]> : tensor<4x2xf32>
  %s = par.mul %h, %c {par.layer = 0, par.phase = #par.phase<forward>} : tensor<4x2xf32>
  %y = par.dot %s, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %l = par.reduce mean %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x2xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x2xf32>
  return %l : tensor<f32>
}

// -----

// A data argument without a batch dimension.
par.mesh @mesh <["pp"=2]>
// expected-error @+1 {{--par-pipeline divide-batch: data argument #0 needs a static tensor type with a batch dimension, got 'tensor<f32>'}}
func.func @scalar_data(%x: tensor<f32> {par.role = "data"}, %w1: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.mul %x, %x {par.layer = 0, par.phase = #par.phase<forward>} : tensor<f32>
  %l = par.neg %h {par.layer = 1, par.phase = #par.phase<forward>} : tensor<f32>
  %g = par.neg %l {par.phase = #par.phase<backward>} : tensor<f32>
  return %l : tensor<f32>
}
