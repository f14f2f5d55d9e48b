#!/usr/bin/env python3
"""Writes a copy of a .drkm module with one field changed to a value that makes no sense, the
section's and the section table's CRC-32s recomputed so that only the reader's checks of
meaning can refuse it (docs/module-format.md). usage: mutate_module.py IN OUT KIND
KIND: dtype (input 0's dtype 17674), dims (input 0's first dim 3.6e11, size unchanged),
offset (input 0's arena offset 1), params (kernel 0's parameter count cut to 1), shift (kernel
0's last parameter record given to kernel 1: every record still owned, in order, so only the
runtime's check against the kernels' code can find it)."""
import struct
import sys
import zlib

src, dst, kind = sys.argv[1:4]
b = bytearray(open(src, "rb").read())
table, nsec = struct.unpack_from("<QI", b, 24)
secs = {}
for i in range(nsec):
    k, al, off, size, crc, _ = struct.unpack_from("<IIQQII", b, table + 32 * i)
    secs.setdefault(k, (i, off, size))
KERNELS, TENSORS = 4, 6
if kind in ("dtype", "dims", "offset"):
    i, off, size = secs[TENSORS]
    rec = off  # tensor 0 (an input: the models here list inputs first)
    assert struct.unpack_from("<I", b, rec + 4)[0] == 0, "tensor 0 is not an input"
    if kind == "dtype":
        struct.pack_into("<i", b, rec + 8, 17674)
    elif kind == "dims":
        struct.pack_into("<q", b, rec + 16, 360000000000)
    else:
        struct.pack_into("<Q", b, rec + 80, 1)
elif kind == "params":
    i, off, size = secs[KERNELS]
    n = struct.unpack_from("<I", b, off + 52)[0]
    assert n > 1, "kernel 0 has %d parameters" % n
    struct.pack_into("<I", b, off + 52, 1)
elif kind == "shift":
    i, off, size = secs[KERNELS]
    assert size >= 2 * 56, "needs two kernels"
    n0 = struct.unpack_from("<I", b, off + 52)[0]
    f1, n1 = struct.unpack_from("<II", b, off + 56 + 48)
    assert n0 >= 1
    struct.pack_into("<I", b, off + 52, n0 - 1)
    struct.pack_into("<II", b, off + 56 + 48, f1 - 1, n1 + 1)
else:
    sys.exit("unknown kind " + kind)
struct.pack_into("<I", b, table + 32 * i + 24, zlib.crc32(bytes(b[off:off + size])))
struct.pack_into("<I", b, 56, zlib.crc32(bytes(b[table:table + 32 * nsec])))
struct.pack_into("<I", b, 60, zlib.crc32(bytes(b[0:60])))
open(dst, "wb").write(b)
