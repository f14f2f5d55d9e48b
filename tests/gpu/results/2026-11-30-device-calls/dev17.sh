#!/bin/bash
# device call 17: stall reasons and SASS of the sm_90a matmul mainloop (2048x5632x2048, n256)
O=/tmp/o17; rm -rf $O; mkdir -p $O; W=/tmp/w17; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
NCU=/usr/local/cuda/bin/ncu
printf 'graph @mm(%%a: f16[2048, 2048], %%b: f16[2048, 5632]) -> (%%c) {\n  %%c: f16[2048, 5632] = MatMul(%%a, %%b)\n  return %%c\n}\n' > $W/g.drkg
$B/drkc $W/g.drkg --target=sm_90a --schedule=mm.tile_n=256 -o $W/n256.drkm
$B/drkc $W/g.drkg --target=sm_90a --schedule=mm.tile_n=256 --emit=cubin -o $W/n256.cubin
/usr/local/cuda/bin/cuobjdump -sass $W/n256.cubin > $O/n256.sass 2>&1 || /usr/local/cuda/bin/nvdisasm $W/n256.cubin > $O/n256.sass 2>&1
timeout 150 $NCU --section WarpStateStats --section SourceCounters --print-details all -k regex:MatMul -c 1 $B/drkrun $W/n256.drkm --iters 1 --warmup 0 > $O/ncu-stall.txt 2>&1
tar czf $OUT/o17.tgz -C /tmp o17
