#!/bin/bash
# device call 24: per-kernel GPU times of one LLaMA call, drkc's module vs torch.compile, under
# Nsight Compute (kernels replayed one at a time, clocks left alone)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o24; rm -rf $O; mkdir -p $O; W=/tmp/w24; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
NCU=/usr/local/cuda/bin/ncu
python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder --outputs none > $O/gen.log 2>&1
MODELS="llama_decoder" tests/bench/full_models.sh $B /tmp/fm $O compile > $O/fm-compile.log 2>&1
M=/tmp/fm/llama_decoder/model.drkm
timeout 200 $NCU --clock-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second --launch-count 81 --csv $B/drkrun $M --iters 1 --warmup 0 > $O/ncu-drk.csv 2> $O/ncu-drk.err
timeout 300 $NCU --clock-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second --nvtx --nvtx-include "drk_call/" --csv python3 tests/bench/torch_profile.py /tmp/fm llama_decoder --mode compile --nvtx > $O/ncu-torch.csv 2> $O/ncu-torch.err
wc -l $O/*.csv; tail -3 $O/*.err
tar czf $OUT/o24.tgz -C /tmp o24
