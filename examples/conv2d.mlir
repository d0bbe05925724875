// A ResNet-style stem: 7x7 filter, stride 2, padding 3, NCHW input, FCHW filter.
func.func @stem(%x: tensor<1x3x56x56xf32>, %w: tensor<16x3x7x7xf32>) -> tensor<1x16x28x28xf32> {
  %y = loom.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x56x56xf32>, tensor<16x3x7x7xf32>) -> tensor<1x16x28x28xf32>
  func.return %y : tensor<1x16x28x28xf32>
}
