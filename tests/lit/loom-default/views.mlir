// RUN: env LOOM_TARGET="cpu=test512,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=test512,l1=32768,l2=1048576,l3=33554432,vector_bits=512,vector_registers=32,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Strided operands (views): a schedule that needs unit strides and gets no copy from
// packing copies the operand into a row-major buffer itself (what loom.contiguous does),
// and says so; elementwise nests read strided views in place.

// A 4x32x32 matmul has fewer rows than MR, and B is transposed (adjacent along k, rows
// of stride 32: `x @ w.T`): each element of C is the dot product of a row of A and a row
// of B's buffer, read in place through a view with the two dimensions swapped (no copy);
// k becomes 16-lane vector sums reduced once per element, 4x4 of them at a time.
// CHECK-LABEL: func.func @transposed_b
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         %b_t = memref.reinterpret_cast %b to offset: [0], sizes: [32, 32], strides: [32, 1] : memref<32x32xf32, strided<[1, 32]>> to memref<32x32xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         affine.for %i = 0 to 4 step 4 {
// CHECK-NEXT:      affine.for %j = 0 to 32 step 4 {
// CHECK-NEXT:        %{{.*}} = affine.for %k = 0 to 32 step 16 iter_args(
// CHECK-NEXT:          %[[A:.*]] = affine.vector_load %a[%i, %k] : memref<4x32xf32>, vector<16xf32>
// CHECK-NEXT:          %[[B:.*]] = affine.vector_load %b_t[%j, %k] : memref<32x32xf32>, vector<16xf32>
// CHECK-NEXT:          %{{.*}} = vector.fma %[[A]], %[[B]], %{{.*}} : vector<16xf32>
// CHECK-NOT:     %b[
// CHECK:             vector.reduction <add>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     memref.dealloc
// REMARK: views.mlir:[[# @LINE + 2]]:3: remark: [loom-default] matmul 4x32x32 on test512: {{.*}}: 4 rows < MR=14 and B a transposed view (memref<32x32xf32, strided<[1, 32]>>, adjacent along k): dot products of rows of A and rows of B's buffer, read in place (loop order i, j, k; k in 16-lane vector sums; 4x4 of them at a time); pass list: loom-unroll-jam{factors=4,4,1 op=matmul},loom-vectorize{width=16 op=matmul},loom-hoist{op=matmul}
func.func @transposed_b(%a: tensor<4x32xf32>, %b: tensor<32x32xf32> {loom.buffer_layout = strided<[1, 32]>}) -> tensor<4x32xf32> {
  %c = loom.matmul %a, %b : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
  func.return %c : tensor<4x32xf32>
}

// -----

// A transposed A needs no copy: the schedule reads A one element at a time (broadcast).
// CHECK-LABEL: func.func @transposed_a
// CHECK-NOT:     memref.alloc
// CHECK:         affine.load %a[%i, %k] : memref<4x32xf32, strided<[1, 4]>>
// REMARK-NOT: B is a strided view
func.func @transposed_a(%a: tensor<4x32xf32> {loom.buffer_layout = strided<[1, 4]>}, %b: tensor<32x32xf32>) -> tensor<4x32xf32> {
  %c = loom.matmul %a, %b : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
  func.return %c : tensor<4x32xf32>
}

// -----

// A broadcast input (stride 0 along the rows) is read once per vector and broadcast:
// the loop is vectorized.
// CHECK-LABEL: func.func @broadcast_input
// CHECK:         affine.vector_load %a[%{{.*}}, %{{.*}}] : memref<4x32xf32>, vector<16xf32>
// CHECK-NEXT:    %[[S:.*]] = affine.load %b[%{{.*}}, %{{.*}}] : memref<4x32xf32, strided<[1, 0]>>
// CHECK-NEXT:    vector.broadcast %[[S]] : f32 to vector<16xf32>
// REMARK: views.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'loom_default_0': vectorized its innermost loop by 16 (main 2 iterations, no remainder)
func.func @broadcast_input(%a: tensor<4x32xf32>, %b: tensor<4x32xf32> {loom.buffer_layout = strided<[1, 0]>}) -> tensor<4x32xf32> {
  %c = loom.add %a, %b : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  func.return %c : tensor<4x32xf32>
}

// -----

// A transposed operand of an elementwise op is read in place, in scalar code
// (loom-vectorize refuses the stride, with a remark).
// CHECK-LABEL: func.func @transposed_input
// CHECK-NOT:     memref.alloc
// CHECK:         affine.load %b[%{{.*}}, %{{.*}}] : memref<4x32xf32, strided<[1, 4]>>
// REMARK: views.mlir:[[# @LINE + 2]]:3: remark: [loom-vectorize] nest 'loom_default_0': its innermost loop not vectorized: %b[%{{.*}}, %{{.*}}] has stride 4 in %{{.*}}
func.func @transposed_input(%a: tensor<4x32xf32>, %b: tensor<4x32xf32> {loom.buffer_layout = strided<[1, 4]>}) -> tensor<4x32xf32> {
  %c = loom.add %a, %b : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  func.return %c : tensor<4x32xf32>
}

// -----

// Both conv2d strategies view the filter as a matrix: a transposed filter is copied
// first (before the convolution, which writes Y once: no zero fill), and freed after it.
// CHECK-LABEL: func.func @transposed_filter
// CHECK-NOT:     loom.tag = "conv2d.init"
// CHECK:         %w_contiguous = memref.alloc() : memref<16x8x3x3xf32>
// CHECK:         } {loom.tag = "conv2d.contiguous"}
// CHECK:         memref.reinterpret_cast %w_contiguous to offset: [0], sizes: [16, 72], strides: [72, 1] : memref<16x8x3x3xf32> to memref<16x72xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         memref.dealloc %w_contiguous : memref<16x8x3x3xf32>
// CHECK-NEXT:    func.return
// REMARK: views.mlir:[[# @LINE + 3]]:3: remark: [loom-default] W is a strided view (memref<16x8x3x3xf32, strided<[1, 16, 384, 128]>>), and both conv2d strategies view it as a matrix: copied into a row-major buffer first (nest 'conv2d.contiguous', like loom.contiguous: memref<16x8x3x3xf32, strided<[1, 16, 384, 128]>> -> memref<16x8x3x3xf32>)
// REMARK: views.mlir:[[# @LINE + 2]]:3: remark: [loom-default] conv2d 1x8x10x10 * 16x8x3x3
func.func @transposed_filter(%x: tensor<1x8x10x10xf32>, %w: tensor<16x8x3x3xf32> {loom.buffer_layout = strided<[1, 16, 384, 128]>}) -> tensor<1x16x8x8xf32> {
  %y = loom.conv2d %x, %w : (tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x8x8xf32>
  func.return %y : tensor<1x16x8x8xf32>
}

// -----

// loom.contiguous of a transposed argument: the copy nest reads it in 8x8 tiles, each
// transposed in registers (loom-transpose-copy's tiles: 8 vectors along its columns through
// a view with its dimensions swapped, 3 rounds of shuffles, 8 vectors along its rows).
// CHECK-LABEL: func.func @contiguous_of_transposed
// CHECK:         %t_t = memref.reinterpret_cast %t to offset: [0], sizes: [40, 24], strides: [24, 1] : memref<24x40xf64, strided<[1, 24]>> to memref<40x24xf64>
// CHECK-NEXT:    affine.for %[[I:.*]] = 0 to 24 step 8 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to 40 step 8 {
// CHECK-NEXT:        affine.vector_load %t_t[%[[J]], %[[I]]] : memref<40x24xf64>, vector<8xf64>
// CHECK-COUNT-7:     affine.vector_load %t_t
// CHECK-COUNT-24:    vector.shuffle
// CHECK-NEXT:        affine.vector_store %{{.*}}, %c[%[[I]], %[[J]]] : memref<24x40xf64>, vector<8xf64>
// CHECK-COUNT-7:     affine.vector_store
// CHECK-NEXT:      }
// CHECK-NEXT:    } {loom.tag = "copy"}
// REMARK: views.mlir:[[# @LINE + 4]]:3: remark: [loom-default] nest 'copy' copies a transposed view: in 8x8 tiles, each cache line it reads or writes used for a whole tile
// REMARK-NEXT: views.mlir:[[# @LINE + 3]]:3: remark: [loom-transpose-copy] copy of %t into %c vectorized as 8x8 tiles transposed in registers: 8 vector loads along its unit-stride dimension, 24 shuffles, 8 vector stores
func.func @contiguous_of_transposed(%a: tensor<40x24xf64>) -> tensor<24x40xf64> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<40x24xf64> -> tensor<24x40xf64>
  %c = loom.contiguous %t : tensor<24x40xf64> -> tensor<24x40xf64>
  func.return %c : tensor<24x40xf64>
}

// -----

// A longer one (300 columns): the 8x8 tiles in blocks of 128x128 (COPY_BLOCK), the
// block's rows clamped to the 40 there are; the last block's columns past the last whole
// tile (296 to 300) run scalar.
// CHECK-LABEL: func.func @contiguous_of_transposed_blocks
// CHECK:         affine.for %[[B0:.*]] = 0 to 40 step 40 {
// CHECK-NEXT:      affine.for %[[B1:.*]] = 0 to 300 step 128 {
// CHECK-NEXT:        %[[REST:.*]] = affine.min affine_map<(d0) -> ((d0 + 128), (d0 + ((((d0 * -1) + 300) floordiv 8) * 8)))> (%[[B1]])
// CHECK-NEXT:        affine.for %[[I:.*]] = {{.*}}(%[[B0]]) to {{.*}}(%[[B0]]) step 8 {
// CHECK-NEXT:          affine.for %{{.*}} = {{.*}}(%[[B1]]) to min {{.*}} step 8 {
// CHECK-COUNT-8:         affine.vector_load %t_t
// CHECK:               }
// CHECK-NEXT:          affine.for %[[J:.*]] = {{.*}}(%[[I]]) to {{.*}}((d0 + 8))>(%[[I]]) {
// CHECK-NEXT:            affine.for %[[K:.*]] = {{.*}}(%[[REST]]) to min affine_map<(d0) -> ((d0 + 128), 300)>(%[[B1]]) {
// CHECK-NEXT:              affine.load %t[%[[J]], %[[K]]] : memref<40x300xf32, strided<[1, 40]>>
// CHECK:         } {loom.tag = "copy"}
// REMARK: views.mlir:[[# @LINE + 3]]:3: remark: [loom-default] nest 'copy' copies a transposed view: in 8x8 tiles, each cache line it reads or writes used for a whole tile, in blocks of 128x128
func.func @contiguous_of_transposed_blocks(%a: tensor<300x40xf32>) -> tensor<40x300xf32> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<300x40xf32> -> tensor<40x300xf32>
  %c = loom.contiguous %t : tensor<40x300xf32> -> tensor<40x300xf32>
  func.return %c : tensor<40x300xf32>
}

// -----

// x @ w.T with more rows than MR (the panel order): B's panels are packed from the
// transposed view, each panel copied as 16x16 tiles transposed in registers (rows of w
// read as vectors along k through a view of its buffer, stored as vectors along the
// panel's rows); loom-default's pass list says so. The panel's last k block (80 of 512
// after 432) is still whole tiles; what a `min` bound may leave runs scalar.
// CHECK-LABEL: func.func @transposed_b_panels
// CHECK:         %b_t = memref.reinterpret_cast %b to offset: [0], sizes: [96, 512], strides: [512, 1] : memref<512x96xf32, strided<[1, 512]>> to memref<96x512xf32>
// CHECK:         affine.for %j_cp = 0 to 32 step 16 {
// CHECK-NEXT:      affine.for %[[K:.*]] = 0 to min {{.*}} step 16 {
// CHECK-NEXT:        affine.vector_load %b_t[%j_t2 + %j_panel * 32 + %j_cp, %k_t + %[[K]]] : memref<96x512xf32>, vector<16xf32>
// CHECK-COUNT-15:    affine.vector_load %b_t
// CHECK-COUNT-64:    vector.shuffle
// CHECK-NEXT:        affine.vector_store %{{.*}}, %b_pack[%j_panel, %[[K]], %j_cp] : memref<1x432x32xf32>, vector<16xf32>
// REMARK: views.mlir:[[# @LINE + 3]]:3: remark: [loom-default] matmul 28x96x512 on test512: {{.*}}; pass list: {{.*}}loom-vectorize{width=16 op=matmul},loom-transpose-copy{width=16 op=matmul},loom-unroll-jam
// REMARK: views.mlir:[[# @LINE + 2]]:3: remark: [loom-transpose-copy] copy of %b into %b_pack (loops %j_cp, %k_cp) vectorized as 16x16 tiles transposed in registers: 16 vector loads along its unit-stride dimension, 64 shuffles, 16 vector stores
func.func @transposed_b_panels(%a: tensor<28x512xf32>, %b: tensor<512x96xf32> {loom.buffer_layout = strided<[1, 512]>}) -> tensor<28x96xf32> {
  %c = loom.matmul %a, %b : (tensor<28x512xf32>, tensor<512x96xf32>) -> tensor<28x96xf32>
  func.return %c : tensor<28x96xf32>
}

// -----

// The same with 30 rows: the 2 rows past the register tiles (a copy peeled off) get the
// dot products of rows of A and rows of B's buffer, read in place, as a matmul of so few
// rows does; B is never copied whole into a row-major buffer (which the row-streaming
// plan of a peeled copy would need).
// CHECK-LABEL: func.func @transposed_b_peeled_rows
// CHECK-NOT:     b_contiguous
// CHECK:         affine.vector_load %b_t[
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         %[[BT:.*]] = memref.reinterpret_cast %b to offset: [0], sizes: [96, 512], strides: [512, 1]
// CHECK:         affine.vector_load %[[BT]][
// CHECK:         vector.reduction <add>
// CHECK-NOT:     b_contiguous
// REMARK-NOT: row-major buffer
// REMARK: views.mlir:[[# @LINE + 3]]:3: remark: [loom-default] matmul 2x96x512 (peeled copy 1 of the nest) on test512: {{.*}}: 2 rows < MR=14 and B a transposed view (memref<512x96xf32, strided<[1, 512]>>, adjacent along k): dot products of rows of A and rows of B's buffer, read in place
// REMARK-NOT: row-major buffer
func.func @transposed_b_peeled_rows(%a: tensor<30x512xf32>, %b: tensor<512x96xf32> {loom.buffer_layout = strided<[1, 512]>}) -> tensor<30x96xf32> {
  %c = loom.matmul %a, %b : (tensor<30x512xf32>, tensor<512x96xf32>) -> tensor<30x96xf32>
  func.return %c : tensor<30x96xf32>
}
