#!/bin/bash
# device call 21: staged-epilogue shape sweep of the GPT-2/BERT/ViT matmul shapes (modules compiled off the GPU machine)
O=/tmp/o21; rm -rf $O; mkdir -p $O; W=/tmp/w21; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
$B/bench_kernels .carry/shapes $O/bench.md > $O/bench.log 2>&1
grep -E "MatMul f16 [0-9x]+ \(" $O/bench.md | sed 's/information (shape sweep)//' | awk -F'|' '{print $2 $3 $4}' | sed 's/TFLOP\/s//g'
tar czf $OUT/o21.tgz -C /tmp o21
