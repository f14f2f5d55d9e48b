#!/usr/bin/env python3
"""Transformers as torch.onnx.export(dynamo=True) writes them, through drkc on an H200 (issue 17).

For each model at the issue's sizes (random weights, built from configs, nothing downloaded):

  bert      BERT-base (12 x 768), b8 s128, padding mask
  gpt2      GPT-2 small with its tied LM head (vocab 50257), b1 s1024, causal
  llama     LLaMA-style decoder, 8 layers, hidden 1024, 16 heads / 4 KV heads (GQA), b1 s2048
  whisper   Whisper-base-sized encoder (6 x 512, 1500 frames)
  vit       ViT-B/16 (transformers ViTModel), b1 224 x 224

it exports the f32 model with the dynamo exporter (tests/zoo/zoo.py's make/export/write_data:
the torch f32 outputs go to test_data_set_0), then for fp16 and bf16:
  1. compiles with --target=sm_90a --precision=P --fusion-aggressiveness=3 --report and prints
     the report's flash-attention kernel count and kernel forms (mm_ws/wgmma: the TMA + wgmma
     matmul; mm/mma_sync: the general one) next to the count wanted (one flash kernel per layer);
  2. `drkc run --device=cuda --check` (every output against the interpreter, zoo.check_run);
     judged like tests/zoo/zoo.py: within max(1e-2, 2 x torch's own error of the module in the
     same dtype against its f32 outputs, same inputs);
  3. only when the check passed (fp16: first drkrun --profile's top-10 kernels, "profile" lines): drkrun's resident median (tests/bench/peers.py drkrun_module)
     and torch.compile(mode="reduce-overhead") of the same module in the same dtype on the GPU
     (peers.time_calls: median of single calls bracketed by CUDA events), and their ratio
     (torch in fp16 only unless --torch-bf16: its compiles take ~30 s a model).
A line per (model, precision) goes to stdout and OUT/results.json; a step that fails says so
and the next one runs. --only picks models, --precisions the dtypes, --budget stops starting
torch.compile timings past that many seconds (drkc's still run).

usage: transformers_export.py --out DIR [--drkc PATH] [--drkrun PATH] [--only M ...]
                              [--precisions fp16,bf16] [--budget S] [--iters N] [--small] [--torch-bf16]
(--small, or no CUDA: 2-layer stand-ins / `drkc run --device=cpu --check`, no timings)
"""

import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
sys.path.insert(0, HERE)
import zoo  # noqa: E402

FAST = ["--target=sm_90a", "--fusion-aggressiveness=3"]
for _p in ("fp16", "bf16"):
    zoo.FLAGS[_p] = FAST + [f"--precision={_p}"]
    zoo.TOL[_p] = 1e-2


def hf_spec(name, cls, cfg_name, keys, inputs, names, layers, **cfg):
    return zoo.Spec(name, "transformer", zoo.hf(cls, cfg_name, keys, **cfg), inputs, names, 1, 0.0), layers


def whisper_build(small=False):
    import transformers
    c = transformers.WhisperConfig(d_model=128 if small else 512, encoder_layers=2 if small else 6,
                                   encoder_attention_heads=4 if small else 8, decoder_layers=1, decoder_attention_heads=4,
                                   encoder_ffn_dim=512 if small else 2048, decoder_ffn_dim=512,
                                   max_source_positions=64 if small else 1500, num_mel_bins=80)
    c._attn_implementation = "sdpa"
    enc = transformers.WhisperModel(c).get_encoder()
    return zoo.Outputs(enc, keys=["last_hidden_state"])


def specs(small=False):
    """name -> (Spec, batch, flash kernels wanted); small: 2-layer stand-ins for trying the
    script out on a CPU (the same exporter forms)"""
    out = {}
    L = (lambda n: 2) if small else (lambda n: n)
    seq = (lambda n: 64) if small else (lambda n: n)
    h = {"hidden_size": 128, "num_attention_heads": 4, "intermediate_size": 512} if small else {}
    s, n = hf_spec("bert", "BertModel", "BertConfig", ["last_hidden_state"], zoo.tokens(30522, seq=seq(128)),
                   ["input_ids", "attention_mask"], L(12), num_hidden_layers=L(12), **h)
    out["bert"] = (s, 2 if small else 8, n)
    g = {"n_embd": 128, "n_head": 4} if small else {}
    s, n = hf_spec("gpt2", "GPT2LMHeadModel", "GPT2Config", ["logits"], zoo.tokens(50257, seq=seq(1024), mask=False),
                   ["input_ids"], L(12), use_cache=False, n_layer=L(12), **g)
    out["gpt2"] = (s, 1, n)
    s, n = hf_spec("llama", "LlamaForCausalLM", "LlamaConfig", ["logits"], zoo.tokens(32000, seq=seq(2048), mask=False),
                   ["input_ids"], L(8), vocab_size=32000, hidden_size=128 if small else 1024,
                   intermediate_size=344 if small else 2816, num_hidden_layers=L(8), num_attention_heads=16,
                   num_key_value_heads=4, max_position_embeddings=4096, use_cache=False)
    out["llama"] = (s, 1, n)
    out["whisper"] = (zoo.Spec("whisper", "speech", lambda: whisper_build(small),
                               lambda b: (zoo._torch().randn(b, 80, 128 if small else 3000),), ["input_features"], 1, 0.0),
                      1, L(6))
    s, n = hf_spec("vit", "ViTModel", "ViTConfig", ["last_hidden_state"], zoo.image(64 if small else 224),
                   ["pixel_values"], L(12), num_hidden_layers=L(12), image_size=64 if small else 224, **h)
    out["vit"] = (s, 1, n)
    return out


def half_verdict(r, torch_err):
    """zoo.fp16_verdict for fp16 and bf16: drkc's check (the f64 interpreter of the f32 model as
    reference) passes within max(1e-2, 2 x torch's own error in the same dtype)."""
    r["torch_half_err"] = float(f"{torch_err:.3g}") if isinstance(torch_err, float) else None
    if not isinstance(torch_err, float):
        r["torch_half_err_error"] = torch_err
        return r
    e = r.get("check_rel_err")
    if "check_error" in r and isinstance(e, float) and e == e and e <= max(zoo.TOL["fast"], 2 * torch_err):
        r.pop("check_error")
        r["note"] = f"within 2x torch's own {r['precision']} error {torch_err:.3g}"
    elif "check_error" in r:
        r["check_error"] += f" (torch's own {r['precision']} error {torch_err:.3g})"
    return r


def drkrun_profile(drkrun, drkm, data, top=10):
    """drkrun --profile's per-kernel medians: the top kernels by time, as (ms, %, name)."""
    p, err, _ = zoo.run([drkrun, drkm, "--input-dir", data, "--warmup", "3", "--iters", "20", "--profile"], 120)
    if err or p.returncode != 0:
        return {"profile_error": err or f"{zoo.describe_rc(p)}: {zoo.first_error(p.stderr)}"}
    rows = [(float(m.group(2)), float(m.group(3)), m.group(4).strip()) for m in
            re.finditer(r"^\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)%\s+(.*)$", p.stdout, re.M)]
    tot = re.search(r"total ([0-9.]+) ms", p.stdout)
    rows.sort(key=lambda x: -x[0])
    return {"profile_total_ms": float(tot.group(1)) if tot else None, "profile_kernels": len(rows),
            "profile_top": [list(x) for x in rows[:top]]}


def torch_time(m, ins, dtype, iters):
    """torch.compile(mode="reduce-overhead") median ms of m in dtype on the GPU."""
    import peers  # noqa: E402  (tests/bench/peers.py)
    torch = zoo._torch()
    import copy
    # a copy: the f32 module on the CPU stays as it is for the next dtype's torch error and timing
    mm = copy.deepcopy(m).to(device="cuda", dtype=getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}[dtype]))
    dev = [a.to("cuda") for a in ins]
    dev = [a.to(next(mm.parameters()).dtype) if a.is_floating_point() else a for a in dev]
    torch._dynamo.reset()
    fn = torch.compile(mm, mode="reduce-overhead")
    secs, _ = peers.first_call(lambda *a: zoo.flat_outputs(fn(*a))[0], dev, True)
    med, mn = peers.time_calls(fn, dev, iters, 3, True)
    torch._dynamo.reset()
    return {"torch_ro_ms": round(med, 4), "torch_ro_min_ms": round(mn, 4), "torch_compile_s": round(secs, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--drkc", default=os.environ.get("DRKC", "drkc"))
    ap.add_argument("--drkrun", default=os.environ.get("DRKRUN", "drkrun"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--precisions", default="fp16,bf16")
    ap.add_argument("--budget", type=float, default=330.0)
    ap.add_argument("--torch-bf16", action="store_true", help="time torch.compile in bf16 too (else fp16 only)")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--small", action="store_true", help="2-layer stand-ins (trying the script out)")
    ap.add_argument("--no-profile", action="store_true", help="skip drkrun --profile's top-10 kernels (fp16)")
    args = ap.parse_args()
    torch = zoo._torch()
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # no GPU: the CPU check, no timings
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    results = []
    all_specs = specs(args.small)
    for name in args.only or list(all_specs):
        spec, batch, want = all_specs[name]
        mdir = os.path.join(args.out, name)
        os.makedirs(mdir, exist_ok=True)
        onnx_path, data = os.path.join(mdir, "model.onnx"), os.path.join(mdir, "test_data_set_0")
        base = {"model": name, "batch": batch, "flash_wanted": want}
        try:
            t = time.time()
            m = zoo.make(spec, "realistic")
            torch.manual_seed(zoo.seed_of(name, "inputs", batch))
            ins = spec.inputs(batch)
            with torch.no_grad():
                outs = zoo.flat_outputs(m(*ins))
            zoo.export(m, ins, onnx_path, "dynamo", spec.names)
            zoo.write_data(data, ins, outs)
            base["export_s"] = round(time.time() - t, 1)
        except Exception as e:  # noqa: BLE001
            r = dict(base, error=f"export: {type(e).__name__}: {str(e)[:300]}")
            zoo.log(json.dumps(r))
            results.append(r)
            continue
        for prec in args.precisions.split(","):
            r = dict(base, precision=prec)
            pdir = os.path.join(mdir, prec)
            os.makedirs(pdir, exist_ok=True)
            drkm = os.path.join(pdir, "model.drkm")
            p, err, secs = zoo.run([args.drkc, onnx_path] + zoo.FLAGS[prec] + ["--report", "-o", drkm], 300)
            c = {"compile_s": round(secs, 1)}
            if err or p.returncode != 0:
                c["error"] = err or f"{zoo.describe_rc(p)}: {zoo.first_error(p.stderr)}"
            rep = (p.stderr if p else "") or ""
            km = re.search(r"-> (\d+) kernels", rep)
            c["kernels"] = int(km.group(1)) if km else None
            fm = re.search(r"report: (\d+) flash-attention kernels; kernel forms:(.*)", rep)
            c["flash"] = int(fm.group(1)) if fm else None
            c["forms"] = fm.group(2).strip() if fm else None
            r.update(c)
            if "error" not in c:
                chk = zoo.check_run(args.drkc, onnx_path, dev, prec, data, os.path.join(pdir, "out"), 300)
                r["check_rel_err"] = chk.get("rel_err")
                if "error" in chk:
                    r["check_error"] = chk["error"]
                half_verdict(r, zoo.torch_fp16_error(m, ins, outs, dev, prec))
            if "error" not in c and "check_error" not in r and dev == "cuda":
                d = zoo.drkrun_latency(args.drkrun, pdir, data, 120)
                r["drkc_ms"] = d.get("median_ms")
                if d.get("error"):
                    r["drkrun_error"] = d["error"][:300]
                if prec == "bf16" and not args.torch_bf16:
                    r["torch_skipped"] = "bf16 torch timing is --torch-bf16"
                elif time.time() - t_start < args.budget:
                    try:
                        r.update(torch_time(m, ins, prec, args.iters))
                    except Exception as e:  # noqa: BLE001
                        r["torch_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                else:
                    r["torch_skipped"] = f"past --budget {args.budget} s"
                if prec == "fp16" and not args.no_profile:
                    r.update(drkrun_profile(args.drkrun, drkm, data))
                    for ms, pct, kname in r.get("profile_top", []):
                        zoo.log(f"  profile {name} {prec}: {ms:9.4f} ms {pct:5.1f}%  {kname}")
                    if r.get("profile_error"):
                        zoo.log(f"  profile {name} {prec}: {r['profile_error']}")
                if r.get("drkc_ms") and r.get("torch_ro_ms"):
                    r["drkc_over_torch_ro"] = round(r["drkc_ms"] / r["torch_ro_ms"], 3)
            ok = "error" not in r and "check_error" not in r
            zoo.log(f"{name:8s} {prec}: flash {r.get('flash')}/{want} | check {'ok' if ok else 'FAIL'} "
                    f"rel {r.get('check_rel_err')} (torch {prec} {r.get('torch_half_err')}) | drkc {r.get('drkc_ms')} ms, torch.compile(ro) "
                    f"{r.get('torch_ro_ms')} ms, ratio {r.get('drkc_over_torch_ro')} | kernels {r.get('kernels')}: "
                    f"{r.get('forms')}" + (f" | {r.get('error') or r.get('check_error')}" if not ok else ""))
            results.append(r)
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump(results, f, indent=1)
        del m
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
    zoo.log(f"total {time.time() - t_start:.0f} s")
    bad = [r for r in results if "error" in r or "check_error" in r]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
