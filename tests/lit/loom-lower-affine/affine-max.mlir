// RUN: loom-opt %s -p loom-lower-affine --allow-unregistered-dialect | filecheck %s

// xDSL 0.74 has no affine.max op: it parses only as an unregistered op (in generic form,
// under --allow-unregistered-dialect). loom-lower-affine lowers it by name to a chain of
// arith.maxsi, as MLIR does.

// CHECK-LABEL: func.func @affine_max
// CHECK-SAME:    (%[[I:.*]]: index, %[[N:.*]]: index) -> index
// CHECK-NEXT:    %[[CM2:.*]] = arith.constant -2 : index
// CHECK-NEXT:    %[[E:.*]] = arith.addi %[[I]], %[[CM2]] : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[M0:.*]] = arith.maxsi %[[E]], %[[C0]] : index
// CHECK-NEXT:    %[[M:.*]] = arith.maxsi %[[M0]], %[[N]] : index
// CHECK-NEXT:    func.return %[[M]] : index
// CHECK-NOT:     affine.max
func.func @affine_max(%i: index, %n: index) -> index {
  %m = "affine.max"(%i, %n) <{map = affine_map<(d0)[s0] -> (d0 - 2, 0, s0)>}> : (index, index) -> index
  func.return %m : index
}
