#!/bin/bash
# device call 16: Nsight Compute on the 2048x5632x2048 matmul: drkc (n128, n256) and cuBLAS
O=/tmp/o16; rm -rf $O; mkdir -p $O; W=/tmp/w16; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; [ -n "$NCU" ] || { ls /usr/local/cuda/bin | head -50; exit 0; }
printf 'graph @mm(%%a: f16[2048, 2048], %%b: f16[2048, 5632]) -> (%%c) {\n  %%c: f16[2048, 5632] = MatMul(%%a, %%b)\n  return %%c\n}\n' > $W/g.drkg
$B/drkc $W/g.drkg --target=sm_90a --schedule=mm.tile_n=128 -o $W/n128.drkm
$B/drkc $W/g.drkg --target=sm_90a --schedule=mm.tile_n=256 -o $W/n256.drkm
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
for v in n128 n256; do timeout 120 $NCU $S -k regex:MatMul -c 1 $B/drkrun $W/$v.drkm --iters 1 --warmup 0 > $O/ncu-$v.txt 2>&1; done
cat > $W/cub.py <<'P'
import torch
a = torch.randn(2048, 2048, device="cuda", dtype=torch.half); b = torch.randn(2048, 5632, device="cuda", dtype=torch.half)
for _ in range(3): c = a @ b
torch.cuda.synchronize()
P
timeout 180 $NCU $S -k regex:'gemm|sm90|xmma|cutlass' -c 1 -s 2 python3 $W/cub.py > $O/ncu-cublas.txt 2>&1
tar czf $OUT/o16.tgz -C /tmp o16
