// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file | filecheck %s
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=fuse}' --split-input-file | filecheck %s --check-prefix=SKIP
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1" loom-opt %s -p 'loom-default{skip=direct}' --split-input-file | filecheck %s --check-prefix=IM2COL
// RUN: env LOOM_TARGET="cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=2" loom-opt %s -p loom-default --split-input-file --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=PARALLEL

// loom-default's step `fuse`: after the matmul is scheduled (6x16 register tiles on AVX2,
// a peeled copy for the last 13 columns), the bias and relu are applied to each vector
// of the block as it is stored after the k loop (K = 37 fits one panel: no guard), the
// masked vector of the copy's last 5 columns with a masked load of the bias.
// With skip=fuse the add and relu nests stay, vectorized.
// CHECK-LABEL: func.func @dense(
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     loom.tag = "matmul.init"
// CHECK:         %[[B:.*]] = affine.vector_load %bias[%j_t2] : memref<45xf32>, vector<8xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %{{.*}}, %[[B]] : vector<8xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:    %[[R:.*]] = arith.maximumf %[[S]], %[[ZERO]] : vector<8xf32>
// CHECK-NEXT:    affine.vector_store %[[R]], %r[%i_t2, %j_t2] : memref<45x45xf32>, vector<8xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         vector.maskedload %bias[
// CHECK:         arith.maximumf
// CHECK-NEXT:    vector.maskedstore %r[
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     loom.tag = "add"
// CHECK-NOT:     loom.tag = "relu"
// CHECK:         func.return
// SKIP-LABEL: func.func @dense(
// SKIP:         %c = memref.alloc() : memref<45x45xf32>
// SKIP:         } {loom.tag = "matmul"}
// SKIP:         } {loom.tag = "add"}
// SKIP:         } {loom.tag = "relu"}
// REMARK: default.mlir:[[# @LINE + 3]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 4]]), relu (line [[# @LINE + 5]]) into the 'matmul' nest (line [[# @LINE + 3]]): applied where it writes each element of %c for the last time, 28 stores (24 unconditionally, 4 in the last iteration of %k), into %r; %c and %s no longer written; the zero fill dropped: the loads that read it read zeros
// PARALLEL: remark: [loom-parallelize] nest 'matmul': loop %i_t2 run in parallel
func.func @dense(%x: tensor<45x37xf32>, %w: tensor<37x45xf32>, %bias: tensor<45xf32>) -> tensor<45x45xf32> {
  %c = loom.matmul %x, %w : (tensor<45x37xf32>, tensor<37x45xf32>) -> tensor<45x45xf32>
  %s = loom.add %c, %bias : (tensor<45x45xf32>, tensor<45xf32>) -> tensor<45x45xf32>
  %r = loom.relu %s : tensor<45x45xf32>
  func.return %r : tensor<45x45xf32>
}

// -----

// clamp (ReLU6) in the epilogue: its two selects a max and a min of vectors.
// CHECK-LABEL: func.func @relu6(
// CHECK:         %[[B:.*]] = affine.vector_load %bias[%j_t2] : memref<45xf32>, vector<8xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %{{.*}}, %[[B]] : vector<8xf32>
// CHECK-DAG:     %[[LO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-DAG:     %[[HI:.*]] = arith.constant dense<6.000000e+00> : vector<8xf32>
// CHECK:         %[[UP:.*]] = arith.maximumf %[[S]], %[[LO]] : vector<8xf32>
// CHECK-NEXT:    %[[R:.*]] = arith.minimumf %[[UP]], %[[HI]] : vector<8xf32>
// CHECK-NEXT:    affine.vector_store %[[R]], %r[%i_t2, %j_t2] : memref<45x45xf32>, vector<8xf32>
// CHECK-NOT:     loom.tag = "clamp"
// CHECK:         func.return
// SKIP-LABEL: func.func @relu6(
// SKIP:         arith.minimumf %{{.*}} : vector<8xf32>
// SKIP:         } {loom.tag = "clamp"}
// REMARK: default.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 3]]), clamp (line [[# @LINE + 4]]) into the 'matmul' nest (line [[# @LINE + 2]])
func.func @relu6(%x: tensor<45x37xf32>, %w: tensor<37x45xf32>, %bias: tensor<45xf32>) -> tensor<45x45xf32> {
  %c = loom.matmul %x, %w : (tensor<45x37xf32>, tensor<37x45xf32>) -> tensor<45x45xf32>
  %s = loom.add %c, %bias : (tensor<45x45xf32>, tensor<45xf32>) -> tensor<45x45xf32>
  %r = loom.clamp %s {min = 0.0 : f64, max = 6.0 : f64} : tensor<45x45xf32>
  func.return %r : tensor<45x45xf32>
}

// -----

// Two rows (fewer than MR = 6): the (k, i, j) plan, k unroll-jammed by 8 over [0, 32),
// its remainder [32, 37) a nest of its own. The main nest's stores are never the last
// write (the remainder's rewrites the same elements): no epilogue there; the
// remainder's are the last when %k >= 36.
// CHECK-LABEL: func.func @rows(
// CHECK:         affine.for %k = 0 to 32 step 8 {
// CHECK-NOT:       arith.maximumf
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         affine.for %k_1 = 32 to 37 {
// CHECK:           %[[LAST:.*]] = arith.constant 36 : index
// CHECK-NEXT:      %[[GUARD:.*]] = arith.cmpi sge, %k_1, %[[LAST]] : index
// CHECK-NEXT:      %[[B:.*]] = affine.vector_load %bias[%j_1] : memref<16xf32>, vector<8xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC:.*]], %[[B]] : vector<8xf32>
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK-NEXT:      %[[R:.*]] = arith.maximumf %[[S]], %[[ZERO]] : vector<8xf32>
// CHECK-NEXT:      %[[V:.*]] = arith.select %[[GUARD]], %[[R]], %[[ACC]] : vector<8xf32>
// CHECK-NEXT:      affine.vector_store %[[V]], %r[%i_1, %j_1] : memref<2x16xf32>, vector<8xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NEXT:    func.return
// REMARK: default.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 3]]), relu (line [[# @LINE + 4]]) into the 'matmul' nest (line [[# @LINE + 2]]): applied where it writes each element of %c for the last time, 2 stores (2 in the last iteration of %k), into %r; %c and %s no longer written; the zero fill dropped: the loads that read it read zeros
func.func @rows(%x: tensor<2x37xf32>, %w: tensor<37x16xf32>, %bias: tensor<16xf32>) -> tensor<2x16xf32> {
  %c = loom.matmul %x, %w : (tensor<2x37xf32>, tensor<37x16xf32>) -> tensor<2x16xf32>
  %s = loom.add %c, %bias : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %r = loom.relu %s : tensor<2x16xf32>
  func.return %r : tensor<2x16xf32>
}

// -----

// A padded 3x3 conv2d in NCHW with a bias per output channel (16x1x1). The direct
// convolution computes Y with each row's overhang into y_wide, then copies y_wide into Y
// (nest 'direct.out'): the epilogue goes into that copy, which now writes %r (the bias a
// broadcast scalar per row of pixels). With skip=direct, im2col's matmul stores into Y
// viewed as a 16 x 100 matrix: the bias is read through a view of that shape, stride 0
// along the pixels.
// CHECK-LABEL: func.func @conv(
// CHECK-NOT:     memref.alloc() : memref<1x16x10x10xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK:         %[[Y:.*]] = affine.vector_load %y_wide[
// CHECK-NEXT:    %[[B:.*]] = affine.load %b[%f, 0, 0] : memref<16x1x1xf32>
// CHECK-NEXT:    %[[BV:.*]] = vector.broadcast %[[B]] : f32 to vector<8xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[Y]], %[[BV]] : vector<8xf32>
// CHECK:         %[[R:.*]] = arith.maximumf %[[S]], %{{.*}} : vector<8xf32>
// CHECK-NEXT:    affine.vector_store %[[R]], %r[%n{{.*}}, %f, %oh, %ow] : memref<1x16x10x10xf32>, vector<8xf32>
// CHECK:         } {loom.tag = "direct.out"}
// CHECK-NOT:     loom.tag = "add"
// IM2COL-LABEL: func.func @conv(
// IM2COL:         %b_view = memref.reinterpret_cast %b to offset: [0], sizes: [16, 100], strides: [1, 0] : memref<16x1x1xf32> to memref<16x100xf32, strided<[1, 0]>>
// IM2COL-NOT:     loom.tag = "conv2d.init"
// IM2COL:         %y_mat = memref.reinterpret_cast %r to offset: [0], sizes: [16, 100], strides: [100, 1]
// IM2COL:         %[[B:.*]] = affine.load %b_view[%i_t2, 0] : memref<16x100xf32, strided<[1, 0]>>
// IM2COL-NEXT:    %[[BV:.*]] = vector.broadcast %[[B]] : f32 to vector<8xf32>
// IM2COL-NEXT:    arith.addf %{{.*}}, %[[BV]] : vector<8xf32>
// IM2COL:         arith.maximumf
// IM2COL-NEXT:    affine.vector_store %{{.*}}, %y_mat[%i_t2, %j_t2] : memref<16x100xf32>, vector<8xf32>
// IM2COL:         } {loom.tag = "matmul"}
// IM2COL-NOT:     loom.tag = "add"
// REMARK: default.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 3]]), relu (line [[# @LINE + 4]]) into the 'direct.out' nest (line [[# @LINE + 2]]): applied where it writes each element of %y for the last time, 2 stores (2 unconditionally), into %r; %y and %s no longer written
func.func @conv(%x: tensor<1x8x10x10xf32>, %w: tensor<16x8x3x3xf32>, %b: tensor<16x1x1xf32>) -> tensor<1x16x10x10xf32> {
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x10x10xf32>
  %s = loom.add %y, %b : (tensor<1x16x10x10xf32>, tensor<16x1x1xf32>) -> tensor<1x16x10x10xf32>
  %r = loom.relu %s : tensor<1x16x10x10xf32>
  func.return %r : tensor<1x16x10x10xf32>
}

// -----

// NHWC: the matmul's rows are the pixels, its columns the channels: Y viewed as 100 x 16,
// the bias (16) a vector along the channels, stride 1.
// CHECK-LABEL: func.func @conv_nhwc(
// CHECK:         %b_view = memref.reinterpret_cast %b to offset: [0], sizes: [100, 16], strides: [0, 1] : memref<16xf32> to memref<100x16xf32, strided<[0, 1]>>
// CHECK:         %y_mat = memref.reinterpret_cast %r to offset: [0], sizes: [100, 16], strides: [16, 1]
// CHECK:         %[[B:.*]] = affine.vector_load %b_view[0, %j_t2] : memref<100x16xf32, strided<[0, 1]>>, vector<8xf32>
// CHECK-NEXT:    arith.addf %{{.*}}, %[[B]] : vector<8xf32>
// CHECK:         arith.maximumf
// CHECK-NEXT:    affine.vector_store %{{.*}}, %y_mat[%i_t2, %j_t2] : memref<100x16xf32>, vector<8xf32>
// CHECK:         } {loom.tag = "matmul"}
// CHECK-NOT:     loom.tag = "add"
func.func @conv_nhwc(%x: tensor<1x10x10x8xf32>, %w: tensor<3x3x8x16xf32>, %b: tensor<16xf32>) -> tensor<1x10x10x16xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc", strides = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x10x10x8xf32>, tensor<3x3x8x16xf32>) -> tensor<1x10x10x16xf32>
  %s = loom.add %y, %b : (tensor<1x10x10x16xf32>, tensor<16xf32>) -> tensor<1x10x10x16xf32>
  %r = loom.relu %s : tensor<1x10x10x16xf32>
  func.return %r : tensor<1x10x10x16xf32>
}

// -----

// MobileNet's 1x1 expansion on 112x112 (M = 12544: two row blocks of MC = 6144 and a last
// one of 252, the last 4 rows peeled off for MR = 6): a row tile %i_t2 starts at a
// multiple of 6 in every block, so its rows end by 12539, before the peeled copy's; the
// epilogue is fused into both nests and the zero fill dropped.
// REMARK: default.mlir:[[# @LINE + 2]]:3: remark: [loom-fuse-epilogue] fused add (line [[# @LINE + 3]]), clamp (line [[# @LINE + 4]]) into the 'matmul' nest (line [[# @LINE + 2]]): applied where it writes each element of %y for the last time, {{.*}} into %c; %y and %z no longer written; the zero fill dropped
func.func @tall_rows(%x: tensor<1x112x112x16xf32>, %w: tensor<1x1x16x96xf32>, %b: tensor<96xf32>) -> tensor<1x112x112x96xf32> {
  %y = loom.conv2d %x, %w {layout = "nhwc"} : (tensor<1x112x112x16xf32>, tensor<1x1x16x96xf32>) -> tensor<1x112x112x96xf32>
  %z = loom.add %y, %b : (tensor<1x112x112x96xf32>, tensor<96xf32>) -> tensor<1x112x112x96xf32>
  %c = loom.clamp %z {min = 0.0 : f64, max = 6.0 : f64} : tensor<1x112x112x96xf32>
  func.return %c : tensor<1x112x112x96xf32>
}
