#!/bin/bash
# device call 26: paired-matmul build: conformance cases + generated models at every configuration
# (run_bundle), matmul schedules; then flat.move_block 1024 (default) / 2048 / 4096 on the five
# full models (drkrun resident medians, alternating)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o26; rm -rf $O; mkdir -p $O; W=/tmp/w26; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --outputs none > $O/gen.log 2>&1
  for m in resnet50 bert_base gpt2_small vit_b16 llama_decoder; do
    for mb in 1024 2048 4096; do
      $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=flat.move_block=$mb -o /tmp/fm/$m/mb$mb.drkm > $O/compile-$m-$mb.log 2>&1 &
    done
  done; wait ) &
( SCHEDULES="mm.tile_n=128 mm.tile_n=256" timeout 250 tests/gpu/matmul_schedules.sh $B/drkc /tmp/ms > $O/matmul-schedules.log 2>&1 ) &
timeout 400 tests/gpu/run_bundle.sh .carry $O cases,models > $O/bundle.log 2>&1
wait
grep -E "passed|failed" $O/cases.log | tail -1; grep "models:" $O/bundle.log; grep -v "PASS.*rc=0" $O/models.log | head -8
tail -1 $O/matmul-schedules.log; grep FAIL $O/matmul-schedules.log | head -3
for r in 1 2; do for m in resnet50 bert_base gpt2_small vit_b16 llama_decoder; do for mb in 1024 2048 4096; do
  echo "$m mb$mb r$r $($B/drkrun /tmp/fm/$m/mb$mb.drkm --iters 50 | grep resident | sed 's/.*: median/median/')"; sleep 1
done; done; done | tee $O/mb.log
tar czf $OUT/o26.tgz -C /tmp o26
