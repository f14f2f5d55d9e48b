#!/bin/bash
# device call 27: staged persistent forms (staging buffers of their own): correctness
# (matmul_schedules incl. SwiGLU pairs) and speed (LLaMA default / ping-pong / cooperative, shapes)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o27; rm -rf $O; mkdir -p $O; W=/tmp/w27; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
tar xJf .carry/shapes.tar.xz -C $W
( python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder --outputs none > $O/gen.log 2>&1
  M=/tmp/fm/llama_decoder
  for v in default:mm.pair=1 p1:mm.persistent=1 p2:mm.persistent=2; do
    $B/drkc $M/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=${v#*:} -o $M/${v%%:*}.drkm > $O/compile-${v%%:*}.log 2>&1 &
  done; wait ) &
( SCHEDULES="mm.persistent=1 mm.persistent=2 mm.persistent=2,mm.tile_n=256" PAIR_SCHEDULES="mm.persistent=1 mm.persistent=2 mm.persistent=2,mm.tile_n=256" timeout 250 tests/gpu/matmul_schedules.sh $B/drkc /tmp/ms > $O/matmul-schedules.log 2>&1 ) &
wait
tail -1 $O/matmul-schedules.log; grep FAIL $O/matmul-schedules.log | head -5
M=/tmp/fm/llama_decoder
for r in 1 2; do for v in default p1 p2; do
  echo "llama $v r$r $($B/drkrun $M/$v.drkm --iters 50 | grep resident | sed 's/.*: median/median/')"; sleep 2
done; done | tee $O/llama.log
$B/bench_kernels $W/.carry/shapes $O/bench.md > $O/bench.log 2>&1; grep "^matmul f16 2048" $O/bench.log | sed 's/, rel err.*//'
tar czf $OUT/o27.tgz -C /tmp o27
