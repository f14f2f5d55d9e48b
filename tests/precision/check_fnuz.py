#!/usr/bin/env python3
"""The premise of drkc's fp8 on gfx942 (backends/amdgpu/lower_math.c, lower_mem.c): gfx942's
conversions and MFMAs use e4m3fnuz/e5m2fnuz, the tile IR and the weights OCP e4m3fn/e5m2.
Checked here with ml_dtypes (exit 77 without it):
  1. every byte but 0x80 and OCP's NaN (and e5m2 inf) bytes means, read as FNUZ, exactly
     half its OCP value (so an fp8 product read as FNUZ is a quarter: the MFMA result x 4);
  2. FNUZ rounding of x / 2 gives OCP's rounding of x, byte for byte, for every finite x in
     OCP's range, except that FNUZ writes 0x00 where OCP writes -0 (0x80).
The byte 0x80 never appears in drkc's weights (passes/precision.c) nor in gfx942's casts."""
import sys

try:
    import numpy as np
    import ml_dtypes as md
except ImportError:
    print("SKIP: numpy and ml_dtypes are needed")
    sys.exit(77)

fail = 0
b = np.arange(256, dtype=np.uint8)
for ocp, fnuz, name, mx, special in ((md.float8_e4m3fn, md.float8_e4m3fnuz, "e4m3", 448.0, {0x7f, 0x80, 0xff}),
                                     (md.float8_e5m2, md.float8_e5m2fnuz, "e5m2", 57344.0,
                                      {0x7c, 0x7d, 0x7e, 0x7f, 0x80, 0xfc, 0xfd, 0xfe, 0xff})):
    o = b.view(ocp).astype(np.float64)
    z = b.view(fnuz).astype(np.float64)
    diff = {i for i in range(256) if not (o[i] == 2 * z[i] or (np.isnan(o[i]) and np.isnan(z[i])))}
    if diff != special:
        print(f"FAIL: {name}: bytes whose OCP value is not twice the FNUZ one: {sorted(hex(i) for i in diff)}")
        fail = 1
    rng = np.random.default_rng(7)
    fin = o[np.isfinite(o)]
    mids = (np.sort(fin)[1:] + np.sort(fin)[:-1]) / 2  # ties: round to nearest even in both
    x = np.concatenate([rng.uniform(-mx, mx, 200000), rng.standard_normal(200000) * mx / 64,
                        rng.standard_normal(50000) * 1e-3, fin, mids]).astype(np.float32)
    x = x[np.abs(x) <= mx]
    want = x.astype(ocp).view(np.uint8)
    want = np.where(want == 0x80, 0, want)
    got = (x / np.float32(2)).astype(fnuz).view(np.uint8)
    bad = np.nonzero(want != got)[0]
    if len(bad):
        print(f"FAIL: {name}: FNUZ(x/2) differs from OCP(x) for {len(bad)} values, e.g. {x[bad][:4]}")
        fail = 1
    else:
        print(f"{name}: {len(x)} values: FNUZ(x/2) == OCP(x) (-0 -> 0)")
print("OK" if not fail else "FAILED")
sys.exit(fail)
