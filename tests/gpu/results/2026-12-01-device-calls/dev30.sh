#!/bin/bash
# device call 30: the refactored build (lower/ layer, pipeline table, per-kernel schedules,
# parallel cached codegen) on the H200: conformance cases and the generated models under --check
# (default, fusion 3 + fp16, bf16), a --schedules edit run under --check, then compile times of
# the five full models on the 16 cores (cold / warm / one job / no cache).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o30; rm -rf $O; mkdir -p $O; W=/tmp/w30; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
export DRK_CACHE_DIR=/tmp/kc30
( python3 tests/models/gen_full_models.py /tmp/fm --outputs none > $O/gen.log 2>&1 ) &
CONFIGS="default --fusion-aggressiveness=3,--precision=fp16 --precision=bf16" timeout 240 tests/gpu/run_bundle.sh .carry $O cases,models > $O/bundle.log 2>&1
wait
{ grep -E "passed|failed" $O/cases.log | tail -1; grep "models:" $O/bundle.log; grep -v "PASS.*rc=0" $O/models.log | head -8; } > $OUT/checks.txt 2>&1
# per-kernel schedule edit under --check: every sm_90a matmul of BERT gets tile_n 128 and 3 stages
M=/tmp/fm/bert_base/model.onnx
$B/drkc $M --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --emit=schedules -o $O/bert.sched 2>>$O/sched.log
sed -E '/ mm_ws /s/mm\.tile_n=[0-9]+/mm.tile_n=128/; / mm_ws /s/mm\.stages=[0-9]+/mm.stages=3/' $O/bert.sched > $O/bert.edit.sched
echo "edited lines: $(diff $O/bert.sched $O/bert.edit.sched | grep -c '^>')" >> $OUT/checks.txt
timeout 120 $B/drkc run $M --device=cuda --check --precision=fp16 --fusion-aggressiveness=3 --schedules=$O/bert.edit.sched 2>&1 | grep -E "check|error" >> $OUT/checks.txt
cat $OUT/checks.txt
nproc; timeout 280 tests/bench/compile_time.sh $B/drkc /tmp/fm resnet50 bert_base gpt2_small vit_b16 llama_decoder | tee $OUT/compile_time.md
cp $O/*.log $O/*.txt $OUT/ 2>/dev/null
