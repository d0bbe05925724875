// A dilated, padded 3x3 convolution in f64, then relu.
func.func @dilated(%x: tensor<2x8x20x20xf64>, %w: tensor<8x8x3x3xf64>) -> tensor<2x8x20x20xf64> {
  %y = loom.conv2d %x, %w {padding = array<i64: 2, 2>, dilations = array<i64: 2, 2>} : (tensor<2x8x20x20xf64>, tensor<8x8x3x3xf64>) -> tensor<2x8x20x20xf64>
  %r = loom.relu %y : tensor<2x8x20x20xf64>
  func.return %r : tensor<2x8x20x20xf64>
}
