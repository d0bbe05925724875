// A quantized dense layer: u8 activations times s8 weights summed exactly in i32, plus an
// i32 bias, dequantized per output channel, relu, requantized to u8 for the next layer.
func.func @int8_layer(%x: tensor<128x256xui8>, %w: tensor<256x64xi8>, %bias: tensor<64xi32>,
                      %scale: tensor<64xf32>, %zero: tensor<64xi32>, %out_scale: tensor<f32>,
                      %out_zero: tensor<i32>) -> tensor<128x64xui8> {
  %acc = loom.matmul %x, %w : (tensor<128x256xui8>, tensor<256x64xi8>) -> tensor<128x64xi32>
  %sum = loom.add %acc, %bias : (tensor<128x64xi32>, tensor<64xi32>) -> tensor<128x64xi32>
  %y = loom.dequantize %sum, %scale, %zero {axis = 1 : i64} : (tensor<128x64xi32>, tensor<64xf32>, tensor<64xi32>) -> tensor<128x64xf32>
  %r = loom.relu %y : tensor<128x64xf32>
  %q = loom.quantize %r, %out_scale, %out_zero : (tensor<128x64xf32>, tensor<f32>, tensor<i32>) -> tensor<128x64xui8>
  func.return %q : tensor<128x64xui8>
}
