// A dense layer: relu(x @ w + bias), the bias broadcast over the rows.
func.func @dense(%x: tensor<128x256xf32>, %w: tensor<256x64xf32>, %bias: tensor<64xf32>) -> tensor<128x64xf32> {
  %c = loom.matmul %x, %w : (tensor<128x256xf32>, tensor<256x64xf32>) -> tensor<128x64xf32>
  %s = loom.add %c, %bias : (tensor<128x64xf32>, tensor<64xf32>) -> tensor<128x64xf32>
  %r = loom.relu %s : tensor<128x64xf32>
  func.return %r : tensor<128x64xf32>
}
