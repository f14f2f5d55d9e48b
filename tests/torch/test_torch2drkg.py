#!/usr/bin/env python3
"""tools/torch2drkg.py against PyTorch's own output: exports tiny models (an MLP, a small CNN,
a transformer block) with torch.export, converts them to .drkg + safetensors, runs
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
    ok &= check_unsupported(work)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
