#!/usr/bin/env python3
"""Writes a SwiGLU graph (graph text, docs/graph-ir.md) for the paired-matmul checks:
y = (g * Sigmoid(g)) * u with g = x.Wg and u = x.Wu, Wg and Wu random f16 constants [K, N]
(scaled by 1/sqrt(K)), x an f16 input of shape BATCH... x M x K.
Usage: gen_swiglu.py OUT.drkg M N K [BATCH ...]"""
import random
import struct
import sys


def main(argv):
    out, M, N, K = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    batch = [int(b) for b in argv[5:]]
    rnd = random.Random(M * 1000003 + N * 1009 + K)
    xs = ", ".join(str(d) for d in batch + [M, K])
    ys = ", ".join(str(d) for d in batch + [M, N])

    def weight():
        s = K ** -0.5
        return "".join(struct.pack("<e", rnd.uniform(-s, s)).hex() for _ in range(K * N))

    with open(out, "w") as f:
        f.write(f"graph @swiglu(%x: f16[{xs}]) -> (%y) {{\n")
        f.write(f'  %wg: f16[{K}, {N}] = const hex"{weight()}"\n')
        f.write(f'  %wu: f16[{K}, {N}] = const hex"{weight()}"\n')
        f.write(f"  %g: f16[{ys}] = MatMul(%x, %wg)\n")
        f.write(f"  %u: f16[{ys}] = MatMul(%x, %wu)\n")
        f.write(f"  %s: f16[{ys}] = Sigmoid(%g)\n")
        f.write(f"  %sg: f16[{ys}] = Mul(%g, %s)\n")
        f.write(f"  %y: f16[{ys}] = Mul(%sg, %u)\n")
        f.write("  return %y\n}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
