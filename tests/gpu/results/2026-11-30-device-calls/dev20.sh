#!/bin/bash
# device call 20: peers for LLaMA and GPT-2 again (call 19's peers.json did not come back), with the
# SM clock and power logged every 200 ms during the timing
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o20; rm -rf $O; mkdir -p $O; W=/tmp/w20; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder gpt2_small --outputs none > $O/gen.log 2>&1
MODELS="llama_decoder gpt2_small" tests/bench/full_models.sh $B /tmp/fm $O compile > $O/fm-compile.log 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 200 > $O/smi.csv 2>&1 &
S=$!
timeout 200 python3 tests/bench/peers.py /tmp/fm --only llama_decoder gpt2_small --modes eager,compile,reduce-overhead --drkrun $B/drkrun --iters 50 --out $O/peers.json > $O/peers.log 2>&1
kill $S
tail -6 $O/peers.log
tar czf $OUT/o20.tgz -C /tmp o20
