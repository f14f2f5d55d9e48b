#!/bin/bash
# device call 23: PyTorch's matmuls (W [N,K] linear vs [K,N] mm) against drkc's on the LLaMA shapes
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o23; rm -rf $O; mkdir -p $O; W=/tmp/w23; rm -rf $W; mkdir -p $W && tar xJf .carry/bench.tar.xz -C $W; B=$W/bin
tar xJf .carry/shapes.tar.xz -C $W
python3 tests/bench/torch_mm.py --iters 100 > $O/torch_mm.log 2>&1
$B/bench_kernels $W/.carry/shapes $O/bench.md > $O/bench.log 2>&1
python3 tests/bench/torch_mm.py --iters 100 > $O/torch_mm2.log 2>&1
cat $O/torch_mm.log; grep "^matmul" $O/bench.log; cat $O/torch_mm2.log
tar czf $OUT/o23.tgz -C /tmp o23
