#!/bin/bash
# device call 38 (2026-12-02, second session): main with h/conv phase 2 (sm_90a conv default,
# padded stem, 16/32-channel steps, BN 256), h/dw (direct depthwise kernel) and h/red phase 2
# (whole rows, one chunk per split program): every script checks against the CPU interpreter
# first, then times (torch.compile parts last; cut by the timeouts if late).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/w38; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun
export DRK_CACHE_DIR=/tmp/kc38; mkdir -p /tmp/o38
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
timeout -k 5 215 tests/bench/conv_hopper.sh /tmp/o38/conv > /tmp/o38/conv.log 2>&1; echo "conv_hopper rc=$?" >> /tmp/o38/conv.log
cp /tmp/o38/conv/table.txt $OUT/conv-table.txt 2>/dev/null; grep -E "PASS|FAIL|rc=" /tmp/o38/conv.log | tail -20
timeout -k 5 185 tests/bench/dwconv.sh /tmp/o38/dw > /tmp/o38/dw.log 2>&1; echo "dwconv rc=$?" >> /tmp/o38/dw.log
cp /tmp/o38/dw/table.txt $OUT/dw-table.txt 2>/dev/null; grep -E "FAIL|rc=" /tmp/o38/dw.log | tail -10
timeout -k 5 150 tests/bench/reductions.sh /tmp/o38/red > /tmp/o38/red.log 2>&1; echo "reductions rc=$?" >> /tmp/o38/red.log
cat /tmp/o38/red/rows/results.md > $OUT/red-results.md 2>/dev/null; cat /tmp/o38/red/spatial/results.md >> $OUT/red-results.md 2>/dev/null
tail -3 /tmp/o38/red.log
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.drkm' --exclude='*.pb' --exclude='*.npy' --exclude='work' -C /tmp o38 2>/dev/null
ls -la $OUT
