// Batched matmul in f64 with an elementwise scale: (A @ B) * S.
func.func @bmm(%a: tensor<4x64x48xf64>, %b: tensor<4x48x32xf64>, %s: tensor<4x64x32xf64>) -> tensor<4x64x32xf64> {
  %c = loom.matmul %a, %b : (tensor<4x64x48xf64>, tensor<4x48x32xf64>) -> tensor<4x64x32xf64>
  %p = loom.mul %c, %s : (tensor<4x64x32xf64>, tensor<4x64x32xf64>) -> tensor<4x64x32xf64>
  func.return %p : tensor<4x64x32xf64>
}
