#!/bin/bash
# device call 63 (2026-12-03, third session; the last device minutes): ConvNeXt-T b32 on the final
# build (76ec21f) against torch.compile(reduce-overhead) in one run (tests/zoo/zoo.py, dynamo
# export, realistic weights, --check at both flag sets).
export PYTHONUNBUFFERED=1
W=/tmp/w63; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o63; rm -rf $O; mkdir -p $O
timeout 150 python3 tests/zoo/zoo.py --drkc $W/bin/drkc --drkrun $W/bin/drkrun --init realistic --exporter dynamo \
  --batch big --big-batch 32 --timeout 145 --out $O/z --only convnext_tiny > $O/z.log 2>&1
cp $O/z/results.json $OUT/dev63-zoo.json 2>/dev/null
grep -hE "^  [a-z0-9_]+ (fresh|realistic)" $O/z.log | cut -c1-200; tail -3 $O/z.log
