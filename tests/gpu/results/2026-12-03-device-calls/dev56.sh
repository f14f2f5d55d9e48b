#!/bin/bash
# device call 56 (2026-12-03, third session): issue 21 on the H200, part 2: BERT-base from
# transformers exported by torch.onnx.export(dynamo=True) with batch and seq dynamic, one module for
# batch 1..32 x seq 1..512 (20 buckets, kernels shared by runtime sizes) against exact-shape modules
# at 8 points (tests/bench/dynamic_bert.sh --export).
export PYTHONUNBUFFERED=1
W=/tmp/w56; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
export DRK_CACHE_DIR=/tmp/kc56
DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun bash tests/bench/dynamic_bert.sh $OUT/dynbert --export --iters 200 2>&1 | grep -v Warning | tail -n 30
rm -f $OUT/dynbert/*.drkm $OUT/dynbert/*.onnx; rm -rf $OUT/dynbert/in_* $OUT/dynbert/out_*
