#!/usr/bin/env python3
"""tools/torch2drkg.py against PyTorch's own output: exports tiny models (an MLP, a small CNN,
a transformer block, the odd ATen ops of real exports) with torch.export, converts them to .drkg + safetensors, runs
`drkc run MODEL.drkg --device=cpu` and compares every output with the eager torch output
(rtol 1e-4, atol 1e-5). Also checks that an unmapped ATen op is refused naming its FX node.

usage: test_torch2drkg.py DRKC WORKDIR
Run with a python that has torch (CI's has none: the test prints 'SKIP:' and exits 77, which CTest reports as skipped). CTest
runs it with $DRK_TORCH_PYTHON if set, else the project's python."""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError as e:
    print(f"SKIP: torch2drkg test needs torch and numpy in {sys.executable} ({e}); "
          "set DRK_TORCH_PYTHON to a python that has them")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from torch2drkg import UnsupportedOp, export_drkg  # noqa: E402


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, groups=2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        x = nn.functional.max_pool2d(x, 2)
        x = nn.functional.avg_pool2d(torch.relu(self.c2(x)), 1)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return torch.softmax(self.fc(x), dim=-1)


class Block(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.h = heads

    def forward(self, ids):
        x = self.emb(ids)
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        a = torch.softmax(q @ k.transpose(-2, -1) / (d // self.h) ** 0.5, dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        x = x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))
        return x, x.mean(dim=1)


class Odds(nn.Module):
    """The ATen ops real exports brought (tests/zoo with --exporter torch2drkg): GroupNorm,
    bilinear/nearest upsampling, constant padding, roll, slice_scatter, x[i, j] with broadcast
    index tensors, gather, index_select, arange, full, fmod, cumsum, any, ne, masked_fill, tril,
    SDPA with a boolean mask (masked rows), SiLU, clamp_min, unbind, weight norm, copy."""

    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)
        self.table = nn.Parameter(torch.randn(9, 3))
        self.register_buffer("rel", torch.randint(0, 9, (5, 5)))
        self.register_buffer("q", torch.randn(1, 2, 5, 4))
        self.wn = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3, padding=1), dim=2)  # wav2vec2's

    def forward(self, x, ids):
        y = self.gn(x)                                                     # [2, 4, 6, 6]
        up = nn.functional.interpolate(y, size=(9, 9), mode="bilinear", align_corners=False)
        up2 = nn.functional.interpolate(y, scale_factor=2, mode="nearest")
        pad = nn.functional.pad(up, (1, 2, 0, 1), value=0.5)               # [2, 4, 10, 12]
        r = torch.roll(pad, shifts=(3, -2), dims=(2, 3))
        m = r.clone()
        m[:, :, 2:5, :] = 7.0                                              # slice_scatter
        bias = self.table[self.rel.view(-1)].view(5, 5, 3).permute(2, 0, 1)  # index on one axis
        rows = torch.arange(0, 5) % 3                                      # arange, fmod
        pick = bias[:, rows[:, None], rows[None, :]]                       # broadcast index tensors
        g = torch.gather(up2, 3, ids.expand(2, 4, 12, 3))
        s = torch.index_select(g, 2, torch.tensor([0, 5, 11]))
        c = torch.cumsum(ids.squeeze(0).squeeze(0), dim=0)                 # int64
        mask = (ids != 0).any(dim=-1, keepdim=True)
        q = self.q
        am = torch.ones(5, 5, dtype=torch.bool).tril()
        am[0] = False                                                      # a fully masked row
        att = nn.functional.scaled_dot_product_attention(q, q + 1, q * 2, attn_mask=am)
        h = nn.functional.silu(s).clamp_min(-0.1).masked_fill(~mask, 0.0)
        a0, a1 = pick.unbind(0)[:2]
        mods = torch.stack([torch.arange(-4, 5) % 3, torch.arange(-4, 5) % -3, torch.fmod(torch.arange(-4, 5), 3)])
        return m, h, c, a0 + a1, att, mods, self.wn(x.flatten(2))


def init_bn(m):
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
    return m


def run_case(drkc, work, name, model, args):
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    model.eval()
    with torch.no_grad():
        ref = model(*args)
    ref = ref if isinstance(ref, tuple) else (ref,)
    path = os.path.join(d, name + ".drkg")
    export_drkg(model, args, path, graph_name=name)
    for i, a in enumerate(args):
        np.save(os.path.join(d, "in", f"input_{i}.npy"), a.numpy())
    out = os.path.join(d, "out")
    r = subprocess.run([drkc, "run", path, "--device=cpu", "--input-dir", os.path.join(d, "in"),
                        "--output-dir", out, "--npy"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: {name}: drkc run exited {r.returncode}\n{r.stdout}{r.stderr}")
        return False
    ok = True
    for i, t in enumerate(ref):
        got = np.load(os.path.join(out, f"output_{i}.npy"))
        want = t.numpy()
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            print(f"FAIL: {name} output {i}: shape {got.shape} vs {want.shape}, max abs diff "
                  f"{np.max(np.abs(got - want)) if got.shape == want.shape else 'n/a'}")
            ok = False
        else:
            print(f"ok: {name} output {i} {list(want.shape)} max abs diff {np.max(np.abs(got - want)):.3g}")
    return ok


def check_unsupported(work):
    class Odd(nn.Module):
        def forward(self, x):
            return torch.cumprod(x, dim=0)

    try:
        export_drkg(Odd(), (torch.randn(4),), os.path.join(work, "odd.drkg"))
    except UnsupportedOp as e:
        msg = str(e)
        if "FX node 'cumprod'" in msg and "aten.cumprod" in msg:
            print(f"ok: unsupported op refused: {msg}")
            return True
        print(f"FAIL: unsupported-op message lacks the node/target: {msg}")
        return False
    print("FAIL: cumprod was not refused")
    return False


def main():
    drkc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    ok = run_case(drkc, work, "mlp", nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Tanh()),
                  (torch.randn(2, 8),))
    ok &= run_case(drkc, work, "cnn", init_bn(CNN()), (torch.randn(2, 3, 12, 12),))
    ok &= run_case(drkc, work, "block", Block(), (torch.randint(0, 50, (2, 7)),))
    gn = Odds()
    gn.gn.weight.data.uniform_(0.5, 1.5)
    gn.gn.bias.data.uniform_(-0.5, 0.5)
    ok &= run_case(drkc, work, "odds", gn, (torch.randn(2, 4, 6, 6), torch.randint(0, 3, (1, 1, 1, 3))))
    ok &= check_unsupported(work)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
