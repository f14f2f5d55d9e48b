#!/bin/bash
# device call 37 (2026-12-02, second session): issue 17's transformers exported by
# torch.onnx.export(dynamo=True) (h/tfm merged: flash attention for the dynamo pattern, Gemm on
# wgmma, padded LM head), checked then timed vs torch.compile(reduce-overhead); issue 19's
# deploy check (the C app linking model.o vs drkrun, --target=sm_90 = sm_90a kernels).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/w37; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun LIBDRKRT=$W/bin/libdrkrt.a
export DRK_CACHE_DIR=/tmp/kc37
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
timeout -k 5 75 tests/gpu/deploy.sh /tmp/o37/deploy > /tmp/o37-deploy.log 2>&1; echo "deploy rc=$?" >> /tmp/o37-deploy.log
tail -8 /tmp/o37-deploy.log
timeout -k 5 490 tests/bench/transformers_export.sh /tmp/o37/tfm > /tmp/o37-tfm.log 2>&1; echo "transformers rc=$?" >> /tmp/o37-tfm.log
cp /tmp/o37/tfm/results.json $OUT/tfm-results.json 2>/dev/null
tail -30 /tmp/o37-tfm.log
mkdir -p /tmp/o37; cp /tmp/o37-*.log /tmp/o37/
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.drkm' --exclude='*.pb' --exclude='*.o' --exclude='*.weights' -C /tmp o37 2>/dev/null
ls -la $OUT
