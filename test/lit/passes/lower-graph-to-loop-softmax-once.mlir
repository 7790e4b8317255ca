// A row kernel that sums exp(x - max) and then divides exp(x - max) by the
// sum (softmax) computes each exp once: a loop of its own ("e", which a
// schedule may vectorize whatever n is) stores every term into the result,
// the sum's lanes loop reads them back and adds them in its order, and the
// row's store loop reads them again and divides (the same values, one exp per
// element instead of two; x is not read again).
// RUN: nc-opt %s -p fuse,lower-graph-to-loop | filecheck %s

graph.func @softmax {
  %x = graph.input "x" : !graph.tensor<[rows, n], f32>
  %m = graph.reduce_max %x axis = 1 : !graph.tensor<[rows, n], f32> -> !graph.tensor<[rows, 1], f32>
  %mb = graph.broadcast %m : !graph.tensor<[rows, 1], f32> -> !graph.tensor<[rows, n], f32>
  %d = graph.sub %x, %mb : !graph.tensor<[rows, n], f32>
  %e = graph.exp %d : !graph.tensor<[rows, n], f32>
  %s = graph.reduce_sum %e axis = 1 : !graph.tensor<[rows, n], f32> -> !graph.tensor<[rows, 1], f32>
  %sb = graph.broadcast %s : !graph.tensor<[rows, 1], f32> -> !graph.tensor<[rows, n], f32>
  %y = graph.div %e, %sb : !graph.tensor<[rows, n], f32>
  graph.return "y" = %y : !graph.tensor<[rows, n], f32>
}
// CHECK:      loop.kernel @fused_div(%[[OUT:.*]]: !loop.ptr<f32>, %[[X:.*]]: !loop.ptr<f32>)
// CHECK:        loop.for "m"
// CHECK:          arith.maximumf
// CHECK:        loop.for "e"
// CHECK:          %[[E:.*]] = math.exp
// CHECK-NEXT:     loop.store %[[E]], %[[OUT]]
// CHECK:        loop.for "k" {{.*}} lanes 16
// CHECK-NEXT:     %[[S:.*]] = loop.load %[[OUT]]
// CHECK-NEXT:     arith.addf {{.*}}%[[S]]
// CHECK:        loop.for "d1"
// CHECK-NEXT:     %[[T:.*]] = loop.load %[[OUT]]
// CHECK-NEXT:     %[[Y:.*]] = arith.divf %[[T]]
// CHECK-NEXT:     loop.store %[[Y]], %[[OUT]]
