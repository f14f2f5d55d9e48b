#!/bin/bash
# device call 28: rows.spt 4 (default) vs 8 (16-byte accesses for 16-bit rows) on the models with
# row kernels (drkrun resident medians, alternating), and a --check of each spt=8 module's model
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o28; rm -rf $O; mkdir -p $O; W=/tmp/w28; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
MS="bert_base gpt2_small vit_b16 llama_decoder"
python3 tests/models/gen_full_models.py /tmp/fm --only $MS --outputs none > $O/gen.log 2>&1
for m in $MS; do for spt in 4 8; do
  $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=rows.spt=$spt -o /tmp/fm/$m/s$spt.drkm > $O/compile-$m-$spt.log 2>&1 &
done; done; wait
( python3 tests/models/gen_full_models.py /tmp/med --medium --only gpt2_small llama_decoder --outputs none > $O/genmed.log 2>&1
  for m in gpt2_small llama_decoder; do for cfg in "--precision=fp16 --fusion-aggressiveness=3 --schedule=rows.spt=8" "--precision=bf16 --schedule=rows.spt=8" "--schedule=rows.spt=8"; do
    echo "== medium $m $cfg: $($B/drkc run /tmp/med/$m/model.onnx --device=cuda --check $cfg 2>&1 | grep -E 'check|error' | tr '\n' ' ')"; done; done > $O/check-med.log ) 
cut -c1-200 $O/check-med.log
for r in 1 2; do for m in $MS; do for spt in 4 8; do
  echo "$m spt$spt r$r $($B/drkrun /tmp/fm/$m/s$spt.drkm --iters 50 | grep resident | sed 's/.*: median/median/')"; sleep 1
done; done; done | tee $O/spt.log
$B/drkrun /tmp/fm/llama_decoder/s8.drkm --iters 20 --warmup 3 --profile > $O/profile-llama-s8.log 2>&1
grep -E "ReduceMean" $O/profile-llama-s8.log | head -4
tar czf $OUT/o28.tgz -C /tmp o28
