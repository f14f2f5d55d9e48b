#!/bin/bash
# device call 12: programmatic dependent launch (LAUNCH section), shrinking-select folding, flat.move_block;
# correctness first, then speed; every step writes into $OUT as it goes (the budget is short)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/o12; mkdir -p $O; W=/tmp/w12; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --outputs none > $O/gen.log 2>&1;
  for m in llama_decoder gpt2_small; do $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 -o /tmp/fm/$m/model.drkm > $O/c-$m.log 2>&1 & done;
  $B/drkc /tmp/fm/llama_decoder/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=flat.move_block=2048 -o /tmp/fm/llama_decoder/mb2048.drkm > $O/c-mb.log 2>&1 & wait
  for m in resnet50 bert_base vit_b16; do $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 -o /tmp/fm/$m/model.drkm > $O/c-$m.log 2>&1 & done; wait ) &
CONFIGS="default --precision=fp16 --fusion-aggressiveness=0 --fusion-aggressiveness=3,--precision=fp16 --precision=bf16 --target=sm_80" timeout 200 tests/gpu/run_bundle.sh .carry $O cases,models > $O/bundle.log 2>&1
grep -E "passed|failed" $O/cases.log | tail -1; grep "models:" $O/bundle.log; grep -v "PASS.*rc=0" $O/models.log | head -5; grep ^FAIL $O/cases.log | head -5
wait
for m in llama_decoder gpt2_small; do
  for pdl in 1 0 1 0; do if [ $pdl = 0 ]; then export DRK_RT_NO_PDL=1; else unset DRK_RT_NO_PDL; fi
    echo "$m pdl=$pdl: $($B/drkrun /tmp/fm/$m/model.drkm --iters 50 --warmup 5 2>&1 | grep -o 'resident.*median [0-9.]* ms')"; done; unset DRK_RT_NO_PDL
done | tee $O/pdl.log
echo "llama move_block 2048: $($B/drkrun /tmp/fm/llama_decoder/mb2048.drkm --iters 50 --warmup 5 2>&1 | grep -o 'resident.*median [0-9.]* ms')" | tee -a $O/pdl.log
timeout 150 python3 tests/bench/peers.py /tmp/fm --only llama_decoder gpt2_small resnet50 bert_base vit_b16 --modes eager,compile,reduce-overhead --drkrun $B/drkrun --iters 50 --out $O/peers.json > $O/peers.log 2>&1
tail -8 $O/peers.log
python3 tests/models/gen_full_models.py /tmp/med --medium --only gpt2_small llama_decoder --outputs none > $O/genmed.log 2>&1
for m in gpt2_small llama_decoder; do echo "== medium $m: $($B/drkc run /tmp/med/$m/model.onnx --device=cuda --check --precision=fp16 --fusion-aggressiveness=3 2>&1 | grep -E 'check|error' | tr '\n' ' ')"; done | tee $O/check-med.log
