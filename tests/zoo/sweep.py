#!/usr/bin/env python3
"""Robustness sweep beyond the zoo: 34 more architectures (Hugging Face transformers configs,
torchvision, timm) at tiny sizes with random weights, exported the ways users export them, and
run through `drkc run --device=cpu --check` against torch's own outputs, then compiled at the
fast flags (`--target=sm_90a --precision=fp16 --fusion-aggressiveness=3`; ptxas, no GPU).

usage: sweep.py OUT [--variant V] [MODEL ...]   (a python with torch, torchvision, timm,
       transformers, onnx, onnxscript; DRKC=path/to/drkc, default build/tools/drkc)
variants: dynamo (default), torchscript (opset 17), keep-inits (TorchScript with
keep_initializers_as_inputs=True: every weight is also a graph input), fp16 (the model and
its float inputs in float16, exported by dynamo; judged against torch's float16 outputs),
ts-dyn (the TorchScript exporter, opset 17, with dynamic_axes {0: batch} on every input; checked
as dyn), dyn (dynamo with a dynamic batch dim; drkc binds it from the inputs; then `drkc --dynamic=batch=1..4`:
tests/dynamic's test_dynamic (TEST_DYNAMIC=path, default build/tests/dynamic/test_dynamic) at every
bucket edge, and the sm_90a module compiled).
Writes OUT/sweep-VARIANT.json and prints a line per model. Results: tests/zoo/results/*-sweep*.md."""
import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoo  # noqa: E402

warnings.filterwarnings("ignore")
DRKC = os.environ.get("DRKC", os.path.join(HERE, "..", "..", "build", "tools", "drkc"))
TEST_DYNAMIC = os.environ.get("TEST_DYNAMIC", os.path.join(HERE, "..", "..", "build", "tests", "dynamic", "test_dynamic"))


def hf(cls_name, cfg_name, **cfg):
    import transformers as T
    def mk():
        return getattr(T, cls_name)(getattr(T, cfg_name)(**cfg)).eval()
    return mk


class Wrap(torch.nn.Module):
    """The model's tensor outputs (the first two) as a tuple, for the exporters."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, *a):
        o = self.m(*a)
        if isinstance(o, torch.Tensor):
            return o
        if hasattr(o, "to_tuple"):
            o = o.to_tuple()
        return tuple(x for x in o if isinstance(x, torch.Tensor))[:2]


def ids(b, s, v):
    return torch.randint(0, v, (b, s))


def img(b, c=3, h=64, w=64):
    return torch.randn(b, c, h, w)

M = {
 "bart": (hf("BartModel", "BartConfig", vocab_size=200, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64), lambda: (ids(1, 16, 200), torch.ones(1, 16, dtype=torch.long), ids(1, 12, 200))),
 "deberta_v2": (hf("DebertaV2Model", "DebertaV2Config", vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, max_position_embeddings=64, relative_attention=True, position_buckets=16, pos_att_type=["p2c", "c2p"]), lambda: (ids(1, 16, 200),)),
 "electra": (hf("ElectraModel", "ElectraConfig", vocab_size=200, embedding_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, max_position_embeddings=64), lambda: (ids(1, 16, 200),)),
 "opt": (hf("OPTModel", "OPTConfig", vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, max_position_embeddings=64, word_embed_proj_dim=64), lambda: (ids(1, 16, 200),)),
 "bloom": (hf("BloomModel", "BloomConfig", vocab_size=200, hidden_size=64, n_layer=2, n_head=4), lambda: (ids(1, 16, 200),)),
 "falcon": (hf("FalconModel", "FalconConfig", vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, new_decoder_architecture=True, num_kv_heads=2), lambda: (ids(1, 16, 200),)),
 "phi3": (hf("Phi3Model", "Phi3Config", vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128, max_position_embeddings=64, pad_token_id=0), lambda: (ids(1, 16, 200),)),
 "gemma": (hf("GemmaModel", "GemmaConfig", vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, head_dim=16, intermediate_size=128, max_position_embeddings=64), lambda: (ids(1, 16, 200),)),
 "gpt_neox": (hf("GPTNeoXModel", "GPTNeoXConfig", vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, max_position_embeddings=64, rotary_pct=0.25), lambda: (ids(1, 16, 200),)),
 "clip_vision": (hf("CLIPVisionModel", "CLIPVisionConfig", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=64, patch_size=16), lambda: (img(1),)),
 "clip_text": (hf("CLIPTextModel", "CLIPTextConfig", vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, max_position_embeddings=32), lambda: (ids(1, 16, 200),)),
 "segformer": (hf("SegformerForSemanticSegmentation", "SegformerConfig", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2], hidden_sizes=[16, 32], num_attention_heads=[1, 2], decoder_hidden_size=32, num_labels=5, downsampling_rates=[1, 4], strides=[4, 2], patch_sizes=[7, 3], mlp_ratios=[2, 2]), lambda: (img(1),)),
 "mobilevit": (hf("MobileViTModel", "MobileViTConfig", image_size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 128]), lambda: (img(1),)),
 "beit": (hf("BeitModel", "BeitConfig", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=64, patch_size=16, use_relative_position_bias=True), lambda: (img(1),)),
 "dinov2": (hf("Dinov2Model", "Dinov2Config", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=64, patch_size=16), lambda: (img(1),)),
 "wavlm": (hf("WavLMModel", "WavLMConfig", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_buckets=32), lambda: (torch.randn(1, 4000),)),
 "convnextv2": (hf("ConvNextV2Model", "ConvNextV2Config", hidden_sizes=[16, 32, 64, 96], depths=[1, 1, 1, 1]), lambda: (img(1),)),
 "detr_like_yolos": (hf("YolosModel", "YolosConfig", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=[64, 64], patch_size=16, num_detection_tokens=5), lambda: (img(1),)),
}
def tv(name, **kw):
    def mk():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kw).eval()
    return mk
def tm(name, **kw):
    def mk():
        import timm
        return timm.create_model(name, pretrained=False, **kw).eval()
    return mk
M.update({
 "inception_v3": (tv("inception_v3", aux_logits=False, init_weights=True), lambda: (img(1, 3, 299, 299),)),
 "maxvit_t": (tv("maxvit_t"), lambda: (img(1, 3, 224, 224),)),
 "swin_v2_t": (tv("swin_v2_t"), lambda: (img(1, 3, 256, 256),)),
 "efficientnet_v2_s": (tv("efficientnet_v2_s"), lambda: (img(1, 3, 128, 128),)),
 "vgg11_bn": (tv("vgg11_bn"), lambda: (img(1, 3, 64, 64),)),
 "regnet_x_400mf": (tv("regnet_x_400mf"), lambda: (img(1, 3, 128, 128),)),
 "ghostnet": (tm("ghostnet_100"), lambda: (img(1, 3, 128, 128),)),
 "nfnet_f0": (tm("dm_nfnet_f0"), lambda: (img(1, 3, 96, 96),)),
 "coatnet": (tm("coatnet_0_rw_224"), lambda: (img(1, 3, 224, 224),)),
 "efficientvit": (tm("efficientvit_b0"), lambda: (img(1, 3, 128, 128),)),
 "eva02_tiny": (tm("eva02_tiny_patch14_224.mim_in22k"), lambda: (img(1, 3, 224, 224),)),
 "hrnet_w18_small": (tm("hrnet_w18_small"), lambda: (img(1, 3, 128, 128),)),
 "res2net50": (tm("res2net50_14w_8s"), lambda: (img(1, 3, 96, 96),)),
 "dla34": (tm("dla34"), lambda: (img(1, 3, 96, 96),)),
 "rexnet": (tm("rexnet_100"), lambda: (img(1, 3, 128, 128),)),
 "vit_reg": (tm("vit_small_patch14_reg4_dinov2", img_size=112), lambda: (img(1, 3, 112, 112),)),
})


def export(m, ins, path, variant):
    names = [f"in{i}" for i in range(len(ins))]
    if variant in ("dynamo", "fp16"):
        zoo.export(m, ins, path, "dynamo", names)
    elif variant == "dyn":
        zoo.export(m, ins, path, "dynamo", names, dynamic=True)
    elif variant == "ts-dyn":
        zoo.export(m, ins, path, "torchscript", names, dynamic=True)
    elif variant == "torchscript":
        zoo.export(m, ins, path, "torchscript", names)
    elif variant == "keep-inits":
        torch.onnx.export(m, tuple(ins), path, dynamo=False, input_names=names, opset_version=17,
                          keep_initializers_as_inputs=True)


def first_line(text, rc):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return (lines[0][:300] if lines else "") + (f" (rc {rc})" if rc < 0 or rc > 2 else "")


def one(name, out, variant):
    mk, inp = M[name]
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    r = {"variant": variant}
    t = time.time()
    try:
        torch.manual_seed(1)
        m = Wrap(mk())
        ins = inp()
        if variant == "fp16":
            m = m.half()
            ins = tuple(x.half() if x.is_floating_point() else x for x in ins)
        with torch.no_grad():
            outs = zoo.flat_outputs(m(*ins))
        zoo.write_data(os.path.join(d, "data"), ins, outs)
        onnx_path = os.path.join(d, "model.onnx")
        try:
            export(m, ins, onnx_path, variant)
        except Exception as e:
            root = e
            while root.__cause__ or (root.__context__ and not root.__suppress_context__):
                root = root.__cause__ or root.__context__
            r["export"] = f"{type(root).__name__}: {str(root).strip().splitlines()[0][:200]}"
            return r
        p = subprocess.run([DRKC, "run", onnx_path, "--device=cpu", "--check", "--input-dir", os.path.join(d, "data"),
                            "--output-dir", os.path.join(d, "out")], capture_output=True, text=True, timeout=900)
        if p.returncode:
            r["drkc_run"] = first_line(p.stderr or p.stdout, p.returncode)
            r["stderr_lines"] = len(p.stderr.splitlines())
            return r
        e, why = zoo.compare_with_torch(os.path.join(d, "out"), os.path.join(d, "data"))
        r["vs_torch"] = why or e
        import onnx
        sym = {d.dim_param for i in onnx.load(onnx_path, load_external_data=False).graph.input
               for d in i.type.tensor_type.shape.dim if d.dim_param}
        bind = [f"--bind={d}={ins[0].shape[0]}" for d in sorted(sym)]  # dyn: the exported batch
        p = subprocess.run([DRKC, onnx_path, "--target=sm_90a", "--precision=fp16", "--fusion-aggressiveness=3",
                            "-o", os.path.join(d, "fast.drkm")] + bind, capture_output=True, text=True, timeout=900)
        r["compile_fast"] = "ok" if p.returncode == 0 else first_line(p.stderr, p.returncode)
        if variant in ("dyn", "ts-dyn") and sym:
            # one module for batch 1..4 (drkc --dynamic): padding proven exact, and at every bucket
            # edge the bucket's graph on zero-padded inputs equals the exact shape (test_dynamic)
            spec = ",".join(f"{d}=1..4" for d in sorted(sym))
            p = subprocess.run([TEST_DYNAMIC, onnx_path, spec, "", ""], capture_output=True, text=True, timeout=1800)
            last = (p.stdout.strip().splitlines() or [""])[-1]
            r["dynamic"] = "ok" if p.returncode == 0 else first_line(p.stderr or last, p.returncode)
            if p.returncode == 0:
                p = subprocess.run([DRKC, onnx_path, "--target=sm_90a", "--precision=fp16", f"--dynamic={spec}",
                                    "-o", os.path.join(d, "dynamic.drkm")], capture_output=True, text=True, timeout=900)
                r["dynamic"] = "ok" if p.returncode == 0 else "compile: " + first_line(p.stderr, p.returncode)
    except Exception as e:
        r["sweep"] = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        r["s"] = round(time.time() - t, 1)
    return r


VARIANTS = ["dynamo", "torchscript", "keep-inits", "fp16", "dyn", "ts-dyn"]


def verdict(r):
    """A cell of the table: the relative error against torch, or the first failing stage."""
    if "export" in r:
        return "export failed (exporter)"
    for k in ("sweep", "drkc_run"):
        if k in r:
            return f"**{k}**: {r[k][:120]}".replace("|", "\\|")
    e = r.get("vs_torch")
    cell = f"{e:.1e}" if isinstance(e, float) else f"**{e}**"
    if r.get("compile_fast") != "ok":
        cell += f"; **fast compile**: {str(r.get('compile_fast'))[:100]}".replace("|", "\\|")
    if "dynamic" in r:
        cell += "; --dynamic ok" if r["dynamic"] == "ok" else f"; **--dynamic**: {r['dynamic'][:140]}".replace("|", "\\|")
    return cell


def report(out, path):
    """OUT/sweep-*.json -> one markdown table (model x variant)."""
    res = {v: json.load(open(os.path.join(out, f"sweep-{v}.json"))) for v in VARIANTS
           if os.path.exists(os.path.join(out, f"sweep-{v}.json"))}
    lines = ["| model | " + " | ".join(res) + " |", "|---|" + "---|" * len(res)]
    for n in M:
        lines.append(f"| {n} | " + " | ".join(verdict(res[v].get(f"{n}:{v}", {"sweep": "not run"})) for v in res) + " |")
    ok = {v: sum(1 for k, r in res[v].items() if isinstance(r.get("vs_torch"), float) and r.get("compile_fast") == "ok")
          for v in res}
    exported = {v: sum(1 for r in res[v].values() if "export" not in r) for v in res}
    dyn = {v: (sum(1 for r in res[v].values() if r.get("dynamic") == "ok"),
               sum(1 for r in res[v].values() if "dynamic" in r)) for v in res}
    head = ["Relative error of `drkc run --device=cpu` (the default build's graph on the reference interpreter) "
            "against torch's outputs, and whether the fast build compiled; per variant, of the exports: "
            + ", ".join(f"{v} {ok[v]}/{exported[v]}" for v in res) + "."
            + "".join(f" `--dynamic` ({v}): {dyn[v][0]} of the {dyn[v][1]} exports with a symbolic batch exact at "
                      "every bucket edge and compiled." for v in res if dyn[v][1]), ""]
    open(path, "w").write("\n".join(head + lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("models", nargs="*")
    ap.add_argument("--variant", default="dynamo", choices=VARIANTS)
    ap.add_argument("--report", metavar="MD", help="write the table of OUT's results to MD and exit")
    a = ap.parse_intermixed_args()
    if a.report:
        report(a.out, a.report)
        return
    res = {}
    path = os.path.join(a.out, f"sweep-{a.variant}.json")
    if os.path.exists(path):
        res = json.load(open(path))
    for n in a.models or list(M):
        r = one(n, os.path.join(a.out, a.variant), a.variant)
        res[f"{n}:{a.variant}"] = r
        print(n, json.dumps(r), flush=True)
        json.dump(res, open(path, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
