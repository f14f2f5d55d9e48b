#!/bin/bash
# device call 33 (2026-12-02): compile times of the five full models after the import / precision /
# package speedups (issue 14's LLaMA goal), drkc tune on the real GPU path (driver.tune_gpu's
# script, then a short RL tune of the generated ResNet-50), and the first part of the model zoo
# (three zoo.py processes side by side, latencies serialized by --gpu-lock).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o33; rm -rf $O; mkdir -p $O; W=/tmp/w33; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
export DRK_CACHE_DIR=/tmp/kc33
nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader
python3 tests/models/gen_full_models.py /tmp/fm --outputs none > $O/gen.log 2>&1
python3 tests/models/gen_models.py /tmp/gm > $O/gen_small.log 2>&1
# 1. compile times (nothing else running)
timeout 200 tests/bench/compile_time.sh $B/drkc /tmp/fm resnet50 bert_base gpt2_small vit_b16 llama_decoder | tee $OUT/compile_time.md
F="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
{ echo "## LLaMA decoder, cold"; rm -rf /tmp/kcl; DRK_CACHE_DIR=/tmp/kcl $B/drkc /tmp/fm/llama_decoder/model.onnx $F --time-stages -o $O/l.drkm 2>&1
  echo "## warm"; DRK_CACHE_DIR=/tmp/kcl $B/drkc /tmp/fm/llama_decoder/model.onnx $F --time-stages -o $O/l.drkm 2>&1
  echo "## ResNet-50 warm"; DRK_CACHE_DIR=/tmp/kcl $B/drkc /tmp/fm/resnet50/model.onnx $F --time-stages -o $O/r.drkm 2>&1; } > $OUT/stages.txt
grep -E "wrote|total" $OUT/stages.txt
# 2. tune on the GPU: the CTest script, then ResNet-50 for 100 s with the RL policy
timeout 150 tests/driver/tune_gpu.sh $B/drkc /tmp/gm $O/tg > $O/tune_gpu.log 2>&1; echo "tune_gpu rc=$?" | tee -a $O/tune_gpu.log
tail -4 $O/tune_gpu.log
( cd $O && timeout 170 $B/drkc tune /tmp/fm/resnet50/model.onnx $F --time=100 --policy=rl --out=$O/r50.sched --log=$O/r50.jsonl > $O/r50-tune.txt 2>&1; echo "tune rc=$?" >> $O/r50-tune.txt )
tail -6 $O/r50-tune.txt
$B/drkc report $O/r50.jsonl -o $O/r50-tune.html 2>&1 | tail -1
# 3. zoo part 1: twelve models, three processes
Z="--drkc $B/drkc --drkrun $B/drkrun --init realistic --exporter dynamo --batch 1 --timeout 300 --gpu-lock $O/gpu.lock"
timeout 330 python3 tests/zoo/zoo.py $Z --out $O/z1 --only vit_b_16 resnet18 mobilenet_v2 googlenet > $O/z1.log 2>&1 &
timeout 330 python3 tests/zoo/zoo.py $Z --out $O/z2 --only bert_base swin_t deit_tiny mixer_s16 > $O/z2.log 2>&1 &
timeout 330 python3 tests/zoo/zoo.py $Z --out $O/z3 --only gpt2 distilbert roberta_base t5_encoder > $O/z3.log 2>&1 &
wait
python3 tests/zoo/zoo.py --merge $O/z1 $O/z2 $O/z3 --out $O --name zoo1 > /dev/null 2>&1
cp $O/zoo1.md $OUT/zoo1-results.md; cp $O/zoo1.json $OUT/zoo1-results.json
grep -hE "^  [a-z0-9_]+ realistic" $O/z?.log | cut -c1-200
tar czf $OUT/logs.tgz -C $O gen.log tune_gpu.log r50-tune.txt r50.jsonl r50.sched r50-tune.html z1.log z2.log z3.log 2>/dev/null
ls $OUT
