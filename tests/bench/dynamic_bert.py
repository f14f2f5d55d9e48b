#!/usr/bin/env python3
"""drkc --dynamic on BERT-base (issue 21): one module for batch 1..32 and seq 1..512, against
exact-shape modules, on the GPU.

BERT-base (12 x 768, 12 heads, FFN 3072, vocab 30522, 512 positions; random weights from a fixed
seed, built with the onnx package as torch exports it: embeddings, padding mask, post-LN layers)
with symbolic `batch` and `seq`, compiled at --target=sm_90a --precision=fp16
--fusion-aggressiveness=3:

  1. --dynamic=batch=1..32,seq=1..512 --buckets='batch:1,4,8,16,32;seq:64,128,256,512' (20
     buckets; the padded keys are masked through a length input the runtime fills, passes/
     pad_exact.h): compile time, module size, and drkc's report (its estimate of the 20
     exact-shape modules' total, flash kernels per bucket);
  2. drkrun's resident median (kernels only, tensors on the GPU) at 8 points (batch, seq): four at
     a bucket's size (the dynamic module must be within 10% of the exact-shape one) and four at
     the worst padding (reported against the exact module of the actual shape), the inputs the
     same .pb files for both (the attention mask has padding of its own); plus each run's output
     against the exact module's (drkrun --output-dir; relative L2, fp16: <= 1e-2), and the sizes
     of those exact modules (the sum over the 20 buckets is estimated from their mean).

A line per point goes to stdout and OUT/results.json. --small: 2 layers, hidden 128, batch 1..8,
seq 1..64 (tries the script out; drkrun fails without a GPU, said per point).
--export: transformers' BertModel through torch.onnx.export(dynamo=True) (needs torch).
usage: dynamic_bert.py --out DIR --drkc PATH --drkrun PATH [--small] [--export] [--iters N]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import gen_models as gm  # noqa: E402

FLAGS = ["--target=sm_90a", "--precision=fp16", "--fusion-aggressiveness=3"]


def build_bert(layers, hidden, heads, ffn, vocab=30522, max_pos=512):
    b = gm.Builder("bert_dyn", seed=2121)
    hd = hidden // heads
    ids = b.input("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = b.input("attention_mask", TensorProto.INT64, ["batch", "seq"])
    word = b.weight([vocab, hidden], scale=0.02, base="word_emb")
    pos = b.weight([max_pos, hidden], scale=0.02, base="pos_emb")
    e = b.op("Gather", [word, ids], axis=0)
    seq = b.dim(ids, 1)
    p = b.op("Slice", [pos, b.i64([0], "starts"), seq, b.i64([0], "axes")])
    x = b.layer_norm(b.op("Add", [e, p]), hidden, 1e-12)
    m = b.op("Unsqueeze", [mask, b.i64([1, 2], "axes")])
    m = b.op("Mul", [b.op("Sub", [b.f32(1.0, "one"), b.op("Cast", [m], to=TensorProto.FLOAT)]), b.f32(-10000.0, "neg")])
    for _ in range(layers):
        q = b.split_heads(b.linear(x, hidden, hidden, "q"), heads, hd)
        k = b.split_heads(b.linear(x, hidden, hidden, "k"), heads, hd)
        v = b.split_heads(b.linear(x, hidden, hidden, "v"), heads, hd)
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        s = b.op("Add", [b.op("Div", [b.op("MatMul", [q, kt]), b.f32(np.sqrt(hd), "sqrt_d")]), m])
        ctx = b.merge_heads(b.op("MatMul", [b.op("Softmax", [s], axis=-1), v]), hidden)
        h1 = b.layer_norm(b.op("Add", [b.linear(ctx, hidden, hidden, "o"), x]), hidden, 1e-12)
        f = b.linear(h1, hidden, ffn, "ffn_in")
        g = b.op("Mul", [b.op("Mul", [f, b.op("Add", [b.op("Erf", [b.op("Div", [f, b.f32(1.4142135381698608, "sqrt2")])]),
                                                      b.f32(1.0, "one")])]), b.f32(0.5, "half")])
        x = b.layer_norm(b.op("Add", [b.linear(g, ffn, hidden, "ffn_out"), h1]), hidden, 1e-12)
    b.op("Identity", [x], out="last_hidden_state")
    b.output("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden])
    return b.model()


def export_bert(path, layers, hidden, heads, ffn):
    """transformers' BertModel (random weights, seed 0) through torch.onnx.export(dynamo=True)
    with batch and seq dynamic: the graph a user would bring (mask code, pooler, ...)."""
    import torch
    from transformers import BertConfig, BertModel

    sys.path.insert(0, os.path.join(HERE, "..", "dynamic", "exports"))
    from export import Hidden  # input_ids, attention_mask -> (last_hidden_state, pooler_output)

    torch.manual_seed(0)
    m = Hidden(BertModel(BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                                    intermediate_size=ffn))).eval()
    ids = torch.randint(0, 30522, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    B, S = torch.export.Dim("batch", min=1, max=512), torch.export.Dim("seq", min=2, max=512)
    torch.onnx.export(m, (ids, mask), path, dynamo=True, input_names=["input_ids", "attention_mask"],
                      dynamic_shapes={"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}, external_data=False)


def write_inputs(d, batch, seq, vocab, seed):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    for i in range(batch):  # some padding: a real batch of sentences
        mask[i, seq - (i * 13) % max(seq // 2, 1):] = 0
    for i, (n, a) in enumerate((("input_ids", ids), ("attention_mask", mask))):
        with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def run(cmd, timeout):
    t = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - t
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s", time.time() - t


def compile_module(drkc, onnx_path, out, extra, timeout=300):
    if os.path.exists(out):
        return True, "cached"
    rc, so, se, sec = run([drkc, onnx_path, *FLAGS, *extra, "-o", out, "-q"], timeout)
    return rc == 0, (se.strip().splitlines() or ["?"])[-1] if rc else f"{sec:.1f} s"


def drkrun_median(drkrun, drkm, in_dir, out_dir, iters):
    rc, so, se, _ = run([drkrun, drkm, "--input-dir", in_dir, "--output-dir", out_dir, "--iters", str(iters)], 300)
    m = re.search(r"resident latency.*median ([0-9.]+) ms", so)
    b = re.search(r"-> bucket \d+: (.*)", so)
    if rc or not m:
        return None, (se.strip().splitlines() or ["drkrun failed"])[-1], None
    return float(m.group(1)), None, b.group(1).strip() if b else None


def rel_l2(a_dir, b_dir):
    a = numpy_helper.to_array(onnx.load_tensor(os.path.join(a_dir, "output_0.pb"))).astype(np.float64)
    b = numpy_helper.to_array(onnx.load_tensor(os.path.join(b_dir, "output_0.pb"))).astype(np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--drkc", required=True)
    ap.add_argument("--drkrun", required=True)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--export", action="store_true",
                    help="BERT from transformers through torch.onnx.export(dynamo=True) instead of the onnx-built one")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.small:
        cfg, bmax, smax = dict(layers=2, hidden=128, heads=4, ffn=512), 8, 64
        bb, sb = (1, 4, 8), (16, 32, 64)
        points = [(1, 16), (4, 32), (8, 64), (4, 64), (3, 17), (5, 33), (2, 1), (7, 63)]
    else:
        cfg, bmax, smax = dict(layers=12, hidden=768, heads=12, ffn=3072), 32, 512
        bb, sb = (1, 4, 8, 16, 32), (64, 128, 256, 512)
        points = [(1, 128), (8, 128), (16, 256), (32, 512), (1, 65), (2, 1), (5, 129), (17, 257)]
    buckets_arg = "batch:" + ",".join(map(str, bb)) + ";seq:" + ",".join(map(str, sb))
    model = os.path.join(a.out, "bert_export.onnx" if a.export else "bert.onnx")
    if not os.path.exists(model):
        if a.export:
            export_bert(model, **cfg)
        else:
            onnx.save(build_bert(**cfg), model)
    results = {"config": cfg, "flags": FLAGS, "buckets": buckets_arg, "points": [], "model": os.path.basename(model)}
    print(f"model: {'transformers BertModel through torch.onnx.export(dynamo=True)' if a.export else 'built with onnx'}")

    # 1. one module for batch 1..bmax and seq 1..smax (the padded keys masked at run time)
    dyn = os.path.join(a.out, "dyn.drkm")
    t = time.time()
    rc, so, se, _ = run([a.drkc, model, *FLAGS, f"--dynamic=batch=1..{bmax},seq=1..{smax}", f"--buckets={buckets_arg}",
                         "-o", dyn, "--report"], 1200)
    rep = [ln for ln in (so + se).splitlines() if "dynamic module" in ln or "flash-attention" in ln]
    if rc:
        print(f"dynamic batch and seq: refused or failed: {(se.strip().splitlines() or ['?'])[-1]}")
        results["both_dims"] = (se.strip().splitlines() or ["?"])[-1]
    else:
        size = os.path.getsize(dyn)
        results["both_dims"] = "compiled"
        results["dynamic_bytes"] = size
        results["compile_s"] = time.time() - t
        print(f"dynamic batch 1..{bmax} x seq 1..{smax}: {len(bb) * len(sb)} buckets, {size / 1e6:.1f} MB, "
              f"compiled in {time.time() - t:.0f} s")
        for ln in rep:
            if "dynamic module" in ln:
                print("  " + ln.strip())
        flash = sorted({ln.split("report:")[1].split(";")[0].strip() for ln in rep if "flash-attention" in ln})
        print(f"  per bucket: {', '.join(flash)}")
        results["report"] = rep

    # 2. latency at the points against exact-shape modules (at the actual shape), outputs compared
    exact_bytes = {}
    for b, s in points:
        tag = f"b{b}_s{s}"
        d = os.path.join(a.out, "in_" + tag)
        write_inputs(d, b, s, 30522, seed=b * 1000 + s)
        e = os.path.join(a.out, f"exact_{tag}.drkm")
        eok, emsg = compile_module(a.drkc, model, e, [f"--bind=batch={b},seq={s}"])
        if eok:
            exact_bytes[tag] = os.path.getsize(e)
        bucket = (next(x for x in bb if x >= b), next(x for x in sb if x >= s))
        t_dyn, err_d, picked = drkrun_median(a.drkrun, dyn, d, os.path.join(a.out, "out_dyn_" + tag), a.iters)
        t_ex, err_e, _ = drkrun_median(a.drkrun, e, d, os.path.join(a.out, "out_exact_" + tag), a.iters)
        row = {"batch": b, "seq": s, "bucket": bucket, "picked": picked, "dynamic_ms": t_dyn, "exact_ms": t_ex,
               "error": err_d or err_e or (None if eok else emsg)}
        if t_dyn and t_ex:
            row["ratio"] = t_dyn / t_ex
            row["rel_l2"] = rel_l2(os.path.join(a.out, "out_dyn_" + tag), os.path.join(a.out, "out_exact_" + tag))
            kind = "at the bucket size (<= 1.10 wanted)" if bucket == (b, s) else f"padded to {bucket[0]}x{bucket[1]}"
            print(f"batch {b:3d} seq {s:4d}: dynamic {t_dyn:.4f} ms, exact {t_ex:.4f} ms, ratio {row['ratio']:.3f} {kind};"
                  f" outputs differ by {row['rel_l2']:.2e}{'' if row['rel_l2'] <= 1e-2 else ' FAIL'}")
        else:
            print(f"batch {b:3d} seq {s:4d}: ERROR {row['error']}")
        results["points"].append(row)
    results["exact_bytes"] = exact_bytes
    if exact_bytes:
        avg = sum(exact_bytes.values()) / len(exact_bytes)
        n = len(bb) * len(sb)
        print(f"module size: dynamic {results.get('dynamic_bytes', 0) / 1e6:.1f} MB; an exact-shape module "
              f"{avg / 1e6:.1f} MB on average (of {len(exact_bytes)}), so the {n} buckets' exact modules ~{n * avg / 1e6:.0f} MB")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
