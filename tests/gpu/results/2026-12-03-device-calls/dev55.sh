#!/bin/bash
# device call 55 (2026-12-03, third session): issue 21 on the H200, part 1: every committed real
# export (tests/dynamic/exports: 12 models, dynamo and TorchScript) through a dynamic module whose
# kernels take runtime sizes, at 4 points x 2 flag sets, against exact-shape modules and the
# interpreter (tests/gpu/dynamic_exports.py). Build a87a2ee + the parallel script.
export PYTHONUNBUFFERED=1
W=/tmp/w55; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
export DRK_CACHE_DIR=/tmp/kc55
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > $OUT/dev55-gpu.txt 2>&1
$W/bin/drkc --version >> $OUT/dev55-gpu.txt 2>&1
timeout -k 10 420 python3 tests/gpu/dynamic_exports.py --out $OUT/exports --drkc $W/bin/drkc --drkrun $W/bin/drkrun --jobs 8 2>&1 |
  tee $OUT/dev55-log.txt | tail -n 30
find $OUT/exports \( -name '*.drkm' -o -name 'in_*' -o -name 'dyn_*' -o -name 'exact_*' -o -name 'interp_*' \) -prune -exec rm -rf {} +
cp $OUT/exports/results.json $OUT/dev55-results.json 2>/dev/null; rm -rf $OUT/exports
