#!/bin/bash
# device call 22: LLaMA latency drift (drkrun and torch.compile, per-run latencies, clocks and
# throttle reasons every 20 ms) and torch.compile's per-kernel times
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o22; rm -rf $O; mkdir -p $O; W=/tmp/w22; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder --outputs none > $O/gen.log 2>&1
MODELS="llama_decoder" tests/bench/full_models.sh $B /tmp/fm $O compile > $O/fm-compile.log 2>&1
M=/tmp/fm/llama_decoder/model.drkm; D=/tmp/fm/llama_decoder/test_data_set_0
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 20 > $O/smi.csv 2>&1 &
S=$!
sleep 1
for r in 1 2; do
  echo "== drkrun 300 ($r) $(date +%T.%N)" >> $O/marks.txt
  $B/drkrun $M --input-dir $D --iters 300 --latencies $O/drk-lat-$r.txt > $O/drk-$r.log 2>&1
  echo "== drkrun 20 random ($r) $(date +%T.%N)" >> $O/marks.txt
  $B/drkrun $M --iters 20 --latencies $O/drk-lat20-$r.txt > $O/drk20-$r.log 2>&1
done
echo "== torch compile $(date +%T.%N)" >> $O/marks.txt
timeout 240 python3 tests/bench/torch_profile.py /tmp/fm llama_decoder --mode compile --iters 300 --latencies $O/torch-lat.txt --top 40 > $O/torch-compile.log 2>&1
echo "== drkrun profile $(date +%T.%N)" >> $O/marks.txt
$B/drkrun $M --input-dir $D --iters 20 --profile > $O/drk-profile.log 2>&1
echo "== end $(date +%T.%N)" >> $O/marks.txt
kill $S
grep -h "median" $O/*.log | head -20
tar czf $OUT/o22.tgz -C /tmp o22
