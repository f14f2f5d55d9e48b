#!/bin/bash
# device call 36 (2026-12-02, second session): the sm_90a implicit-GEMM conv (h/conv, behind
# conv.hopper=1) and the few-long-rows reductions (h/red phase 1) on the H200: each script
# checks against the CPU interpreter first, then times against cuDNN / torch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/w36; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun
export DRK_CACHE_DIR=/tmp/kc36
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
timeout -k 5 300 tests/bench/conv_hopper.sh /tmp/o36/conv > /tmp/o36-conv.log 2>&1; echo "conv_hopper rc=$?" >> /tmp/o36-conv.log
cp /tmp/o36/conv/table.txt $OUT/conv-table.txt 2>/dev/null
tail -40 /tmp/o36-conv.log
timeout -k 5 250 tests/bench/reductions.sh /tmp/o36/red > /tmp/o36-red.log 2>&1; echo "reductions rc=$?" >> /tmp/o36-red.log
cp /tmp/o36/red/kernels/results.md $OUT/red-results.md 2>/dev/null
tail -30 /tmp/o36-red.log
cp /tmp/o36-conv.log /tmp/o36-red.log /tmp/o36/
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.drkm' --exclude='*.pb' --exclude='work' -C /tmp o36 2>/dev/null
ls -la $OUT
