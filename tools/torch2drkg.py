#!/usr/bin/env python3
"""torch2drkg: a torch.export program -> a .drkg graph dump plus a safetensors weights sidecar.

For models the ONNX exporter cannot export: torch.export.export(model, args), decomposed to
core ATen (ep.run_decompositions()), walked node by node and mapped to drkc graph ops
(ir/graph_ops.def, ai.onnx opset-21 semantics). Parameters, buffers and lifted constants go to
the sidecar (written here with json+struct, no safetensors package needed); the .drkg names
it with a `weights "FILE"` line and each weight as `const weights "NAME"`, which drkc maps
without copying. See docs/graph-ir.md ("PyTorch frontend").

Library use:   from torch2drkg import export_drkg; export_drkg(model, (x,), "out/model.drkg")
Command line:  torch2drkg.py MODULE:FACTORY OUT.drkg --shape 1,3,32,32 [--shape ...]
               (FACTORY() returns the nn.Module; inputs are random f32 of the given shapes)

Shapes are taken from the exported program's metadata (static; a symbolic torch dim is written
as a symbolic dim named after its symbol). An ATen op without a mapping stops the conversion
with an error naming the FX node and its target."""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {
    torch.float64: ("f64", "F64"), torch.float32: ("f32", "F32"), torch.float16: ("f16", "F16"),
    torch.bfloat16: ("bf16", "BF16"), torch.int64: ("i64", "I64"), torch.int32: ("i32", "I32"),
    torch.int16: ("i16", "I16"), torch.int8: ("i8", "I8"), torch.uint8: ("u8", "U8"), torch.bool: ("bool", "BOOL"),
}


class UnsupportedOp(Exception):
    pass


def _bare(s):
    return s and all(c.isalnum() or c in "_.$" for c in s) and s.isascii()


def _quote(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _vname(s):
    return "%" + (s if _bare(s) else _quote(s))


def _float(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    r = repr(x)
    return r if any(c in r for c in ".en") else r + ".0"


def _attr(v):
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, (list, tuple)):
        if not v:
            return "ints[]"
        if any(isinstance(e, float) for e in v):
            return "[" + ", ".join(_float(e) for e in v) + "]"
        return "[" + ", ".join(str(int(e)) for e in v) + "]"
    raise TypeError(v)


def _dims(shape):
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(str(d))
        else:  # SymInt
            s = str(d)
            out.append(s if s.isidentifier() else _quote(s))
    return out


def _type(dtype, shape):
    if dtype not in DTYPES:
        raise UnsupportedOp(f"dtype {dtype} has no drkc counterpart")
    return f"{DTYPES[dtype][0]}[{', '.join(_dims(shape))}]"


def _tensor_bytes(t):
    t = t.detach().cpu().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def write_safetensors(path, tensors):
    """tensors: dict name -> torch.Tensor. Larger element sizes first, so every tensor is
    aligned to its element size (the header is padded to 8 bytes)."""
    order = sorted(tensors, key=lambda n: -tensors[n].element_size())
    header, blobs, off = {"__metadata__": {"format": "pt", "producer": "drkc torch2drkg"}}, [], 0
    for n in order:
        b = _tensor_bytes(tensors[n])
        header[n] = {"dtype": DTYPES[tensors[n].dtype][1], "shape": list(tensors[n].shape),
                     "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class _Emitter:
    def __init__(self, ep):
        self.ep = ep
        self.lines = []
        self.consts = []  # .drkg const lines (inline)
        self.weights = {}  # sidecar name -> tensor
        self.vals = {}  # fx node -> drkc value name (or tuple of names for multi-result nodes)
        self.names = set()
        self.k = 0
        self.memo = {}  # values made once and shared (a mask's additive bias)
        self.weight_of = {}  # placeholder fx node of a weight -> (sidecar name, index of its const line)

    def fresh(self, base):
        base = base or "v"
        n, i = base, 0
        while n in self.names:
            i += 1
            n = f"{base}_{i}"
        self.names.add(n)
        return n

    def const(self, t, base="c"):
        """A small constant, inline as hex."""
        n = self.fresh(base)
        self.consts.append(f"  {_vname(n)}: {_type(t.dtype, t.shape)} = const hex\"{_tensor_bytes(t).hex()}\"")
        return n

    def i64(self, vals, base="shape"):
        return self.const(torch.tensor(list(vals), dtype=torch.int64), base)

    def scalar(self, x, dtype, base="s"):
        return self.const(torch.tensor(x, dtype=dtype), base)

    def op(self, node, op, args, attrs=None, n_results=1, metas=None):
        """Emits `results = op(args) {attrs}`; returns the result name(s)."""
        metas = metas or [node.meta["val"]]
        rs = []
        for i in range(n_results):
            rs.append(self.fresh(node.name if i == 0 else f"{node.name}.{i}"))
        res = ", ".join(f"{_vname(r)}: {_type(m.dtype, m.shape)}" for r, m in zip(rs, metas))
        a = ", ".join("_" if x is None else _vname(x) for x in args)
        at = ""
        if attrs:
            at = " {" + ", ".join(f"{k} = {_attr(v)}" for k, v in attrs.items()) + "}"
        self.lines.append(f"  {res} = {op}({a}){at}")
        return rs[0] if n_results == 1 else tuple(rs)

    def inter(self, node, op, args, meta, attrs=None):
        """An intermediate value (not the node's own result)."""
        n = self.fresh(node.name + "_" + op.lower())
        at = " {" + ", ".join(f"{k} = {_attr(v)}" for k, v in attrs.items()) + "}" if attrs else ""
        self.lines.append(f"  {_vname(n)}: {_type(meta.dtype, meta.shape)} = {op}({', '.join(_vname(x) for x in args)}){at}")
        return n


def _meta(dtype, shape):
    """The dtype and shape of an intermediate value (what _type reads)."""
    import types
    return types.SimpleNamespace(dtype=dtype, shape=list(shape))


def _val(em, node, x, like_dtype):
    """A tensor operand: an FX node's value, or a python scalar made a constant."""
    if isinstance(x, torch.fx.Node):
        return em.vals[x]
    if isinstance(x, (bool, int, float)):
        return em.scalar(x, like_dtype)
    raise UnsupportedOp(f"operand {x!r}")


def _pairs(p, n=2):
    p = list(p) if isinstance(p, (list, tuple)) else [p] * n
    return p * n if len(p) == 1 else p


BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max", "minimum": "Min",
          "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual",
          "logical_and": "And", "logical_or": "Or"}
UNARY = {"neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "tanh": "Tanh", "sigmoid": "Sigmoid",
         "relu": "Relu", "abs": "Abs", "erf": "Erf", "reciprocal": "Reciprocal", "sin": "Sin", "cos": "Cos",
         "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "logical_not": "Not", "clone": "Identity",
         "alias": "Identity", "detach": "Identity", "lift_fresh_copy": "Identity", "hardswish": "HardSwish",
         "hardsigmoid": "HardSigmoid"}
RESHAPES = {"view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten", "view_copy"}
REDUCE = {"mean": "ReduceMean", "sum": "ReduceSum", "amax": "ReduceMax", "amin": "ReduceMin"}


def _sdpa(em, node, a, kw, meta):
    """scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0, is_causal=False, *,
    scale=None, enable_gqa=False) as the ONNX Attention import writes it (docs/onnx-import.md):
    Softmax((Q * sqrt(s)) . (K^T * sqrt(s)) + bias) . V, bias from the mask (boolean: 0 / -inf)
    and the causal mask (top-left aligned, as PyTorch's), fully masked rows 0 (PyTorch's safe
    softmax) where a runtime mask can mask a whole row, K/V heads repeated for GQA."""
    names = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal"]
    arg = dict(zip(names, a))
    arg.update(kw)
    q, k, v = arg["query"], arg["key"], arg["value"]
    mask, causal = arg.get("attn_mask"), bool(arg.get("is_causal", False))
    if arg.get("dropout_p", 0.0):
        raise UnsupportedOp("scaled_dot_product_attention with dropout")
    qm, km, vm = (x.meta["val"] for x in (q, k, v))
    if qm.dim() < 2 or km.dim() != qm.dim() or vm.dim() != qm.dim():
        raise UnsupportedOp("scaled_dot_product_attention of mixed ranks")
    dt = qm.dtype
    L, S, E = qm.shape[-2], km.shape[-2], qm.shape[-1]
    scale = arg.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    kv = []
    for x, xm in ((k, km), (v, vm)):
        xv = em.vals[x]
        if qm.dim() >= 3 and xm.shape[-3] != qm.shape[-3]:  # GQA: each K/V head serves rep query heads
            hq, hk = qm.shape[-3], xm.shape[-3]
            if not arg.get("enable_gqa", False) or hq % hk:
                raise UnsupportedOp(f"scaled_dot_product_attention with {hq} query heads and {hk} key heads")
            lead = list(xm.shape[:-3])
            s5 = lead + [hk, 1] + list(xm.shape[-2:])
            e5 = lead + [hk, hq // hk] + list(xm.shape[-2:])
            r = em.inter(node, "Reshape", [xv, em.i64(s5)], _meta(xm.dtype, s5))
            r = em.inter(node, "Expand", [r, em.i64(e5)], _meta(xm.dtype, e5))
            xm = _meta(xm.dtype, lead + [hq] + list(xm.shape[-2:]))
            xv = em.inter(node, "Reshape", [r, em.i64(xm.shape)], xm)
        kv.append((xv, xm))
    (kval, km), (vval, vm) = kv
    sq = em.scalar(math.sqrt(scale), dt)
    qs = em.inter(node, "Mul", [em.vals[q], sq], qm)
    perm = list(range(km.dim()))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    ktm = _meta(dt, [km.shape[d] for d in perm])
    kt = em.inter(node, "Transpose", [kval], ktm, {"perm": perm})
    ks = em.inter(node, "Mul", [kt, sq], ktm)
    sshape = list(qm.shape[:-1]) + [S]
    s = em.inter(node, "MatMul", [qs, ks], _meta(dt, sshape))
    may_empty = False
    if causal:
        bias = torch.zeros(L, S, dtype=dt).masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
        s = em.inter(node, "Add", [s, em.const(bias, "causal")], _meta(dt, sshape))
    if mask is not None:
        mm = mask.meta["val"]
        mv = em.vals[mask]
        if mm.dtype == torch.bool:  # 0 / -inf, once per mask (every layer passes the same one)
            key = ("mask_bias", mv, dt)
            if key not in em.memo:
                em.memo[key] = em.inter(node, "Where", [mv, em.scalar(0.0, dt), em.scalar(float("-inf"), dt)],
                                        _meta(dt, mm.shape))
            mv = em.memo[key]
        s = em.inter(node, "Add", [s, mv], _meta(dt, torch.broadcast_shapes(tuple(sshape), tuple(mm.shape))))
        may_empty = True
    p = em.inter(node, "Softmax", [s], _meta(dt, sshape), {"axis": -1})
    if may_empty:
        nan = em.inter(node, "IsNaN", [p], _meta(torch.bool, sshape))
        p = em.inter(node, "Where", [nan, em.scalar(0.0, dt), p], _meta(dt, sshape))
    return em.op(node, "MatMul", [p, vval])


def _convert(em, node):
    tgt = node.target
    name = getattr(tgt, "_opname", None) or getattr(tgt, "__name__", str(tgt))
    ovl = getattr(tgt, "_overloadname", "")
    a = list(node.args)
    kw = dict(node.kwargs)
    meta = node.meta.get("val")
    odt = meta.dtype if isinstance(meta, torch.Tensor) else None

    if tgt is __import__("operator").getitem:
        src, i = a
        v = em.vals[src]
        if not isinstance(v, tuple):
            raise UnsupportedOp("getitem of a single value")
        if v[i] is None:
            raise UnsupportedOp(f"result #{i} of {src.name} ({src.target}) is not produced (only #0 maps)")
        return v[i]
    if name in BINARY:
        x, y = a[0], a[1]
        # comparisons: scalar takes the tensor operand's dtype; arithmetic: the result's
        tdt = next((n.meta["val"].dtype for n in (x, y) if isinstance(n, torch.fx.Node)), odt)
        like = tdt if name in ("eq", "lt", "le", "gt", "ge") else odt
        if name == "div" and kw.get("rounding_mode"):
            raise UnsupportedOp(f"div rounding_mode={kw['rounding_mode']!r}")
        xv, yv = _val(em, node, x, like), _val(em, node, y, like)
        alpha = kw.get("alpha", 1)
        if alpha != 1:
            yv = em.inter(node, "Mul", [yv, em.scalar(alpha, like)], y.meta["val"] if isinstance(y, torch.fx.Node) else meta)
        return em.op(node, BINARY[name], [xv, yv])
    if name in UNARY:
        return em.op(node, UNARY[name], [em.vals[a[0]]])
    if name == "rsqrt":
        s = em.inter(node, "Sqrt", [em.vals[a[0]]], meta)
        return em.op(node, "Reciprocal", [s])
    if name == "gelu":
        return em.op(node, "Gelu", [em.vals[a[0]]], {"approximate": kw.get("approximate", a[1] if len(a) > 1 else "none")})
    if name == "leaky_relu":
        return em.op(node, "LeakyRelu", [em.vals[a[0]]], {"alpha": float(a[1] if len(a) > 1 else 0.01)})
    if name in ("hardtanh", "clamp"):
        lo = a[1] if len(a) > 1 else kw.get("min", -1.0 if name == "hardtanh" else None)
        hi = a[2] if len(a) > 2 else kw.get("max", 1.0 if name == "hardtanh" else None)
        return em.op(node, "Clip", [em.vals[a[0]], None if lo is None else em.scalar(lo, odt),
                                    None if hi is None else em.scalar(hi, odt)])
    if name == "where":
        return em.op(node, "Where", [em.vals[a[0]], _val(em, node, a[1], odt), _val(em, node, a[2], odt)])
    if name in ("mm", "bmm", "matmul"):
        return em.op(node, "MatMul", [em.vals[a[0]], em.vals[a[1]]])
    if name == "addmm":
        beta, alpha = kw.get("beta", 1), kw.get("alpha", 1)
        return em.op(node, "Gemm", [em.vals[a[1]], em.vals[a[2]], em.vals[a[0]]],
                     {"alpha": float(alpha), "beta": float(beta)})
    if name in RESHAPES:
        if list(a[0].meta["val"].shape) == list(meta.shape):
            return em.vals[a[0]]  # a view of the same shape (contiguity in torch): the value itself
        # one Reshape per (value, shape): nn.Linear flattens its input once per layer, and the
        # q/k/v projections must read one value for merge-matmul to see them
        key = ("reshape", em.vals[a[0]], tuple(meta.shape))
        if key not in em.memo:
            em.memo[key] = em.op(node, "Reshape", [em.vals[a[0]], em.i64(meta.shape)])
        return em.memo[key]
    if name in ("permute", "t", "numpy_T", "transpose"):
        if name == "permute":
            p = [d % meta.dim() for d in a[1]]
        elif name == "transpose":
            p = list(range(meta.dim()))
            i, j = a[1] % meta.dim(), a[2] % meta.dim()
            p[i], p[j] = p[j], p[i]
        else:
            p = [1, 0]
        w = em.weight_of.get(a[0])
        if w is not None and len(a[0].users) == 1:
            # a weight only read transposed (nn.Linear's addmm(b, x, W^T)): stored transposed,
            # as the ONNX exporters store it, so MatMul sees a constant B (merge-matmul, ...)
            key, i = w
            t = em.weights.pop(key).permute(p).contiguous()
            em.weights[key + ".T"] = t
            em.consts[i] = f"  {_vname(em.vals[a[0]])}: {_type(t.dtype, t.shape)} = const weights {_quote(key + '.T')}"
            return em.vals[a[0]]
        return em.op(node, "Transpose", [em.vals[a[0]]], {"perm": p})
    if name == "expand":
        return em.op(node, "Expand", [em.vals[a[0]], em.i64(meta.shape)])
    if name in ("_to_copy", "to"):
        src = a[0].meta["val"].dtype
        if odt == src:
            return em.op(node, "Identity", [em.vals[a[0]]])
        return em.op(node, "Cast", [em.vals[a[0]]], {"to": _ONNX_CODE[odt]})
    if name == "_safe_softmax":  # softmax whose fully masked rows (all -inf) give 0, not NaN
        sm = em.inter(node, "Softmax", [em.vals[a[0]]], meta, {"axis": a[1]})
        nan = em.inter(node, "IsNaN", [sm], _meta(torch.bool, meta.shape))
        return em.op(node, "Where", [nan, em.scalar(0.0, odt), sm])
    if name in ("_softmax", "softmax", "_log_softmax", "log_softmax"):
        return em.op(node, "LogSoftmax" if "log" in name else "Softmax", [em.vals[a[0]]], {"axis": a[1]})
    if name == "native_layer_norm":
        x, ns, w, b, eps = a
        n = len(ns)
        xm = a[0].meta["val"]
        wv = em.vals[w] if w is not None else em.const(torch.ones(list(ns), dtype=xm.dtype), "ln_ones")
        bv = em.vals[b] if b is not None else em.const(torch.zeros(list(ns), dtype=xm.dtype), "ln_zeros")
        r = em.op(node, "LayerNormalization", [em.vals[x], wv, bv], {"axis": -n, "epsilon": float(eps)},
                  metas=[node.meta["val"][0]])
        return (r, None, None)
    if name == "_native_batch_norm_legit_no_training":
        x, w, b, rm, rv, _mom, eps = a
        r = em.op(node, "BatchNormalization", [em.vals[v] for v in (x, w, b, rm, rv)], {"epsilon": float(eps)},
                  metas=[node.meta["val"][0]])
        return (r, None, None)
    if name == "convolution":
        x, w, b, stride, pad, dil, transposed, opad, groups = a
        k = len(w.meta["val"].shape) - 2
        attrs = {"strides": _pairs(stride, k), "pads": _pairs(pad, k) * 2, "dilations": _pairs(dil, k), "group": groups}
        if transposed:
            attrs["output_padding"] = _pairs(opad, k)
        return em.op(node, "ConvTranspose" if transposed else "Conv",
                     [em.vals[x], em.vals[w]] + ([em.vals[b]] if b is not None else []), attrs)
    if name in ("max_pool2d_with_indices", "max_pool2d", "max_pool1d", "max_pool3d_with_indices"):
        k = int(name[8]) if name[8].isdigit() else 2
        ks = _pairs(a[1], k)
        st = _pairs(a[2], k) if len(a) > 2 and a[2] else ks
        pd = _pairs(a[3], k) if len(a) > 3 else [0] * k
        dl = _pairs(a[4], k) if len(a) > 4 else [1] * k
        cm = int(a[5]) if len(a) > 5 else 0
        m = meta[0] if isinstance(meta, (tuple, list)) else meta
        r = em.op(node, "MaxPool", [em.vals[a[0]]], {"kernel_shape": ks, "strides": st, "pads": pd * 2,
                                                       "dilations": dl, "ceil_mode": cm}, metas=[m])
        return (r, None) if "indices" in name else r
    if name in ("avg_pool2d", "avg_pool1d", "avg_pool3d"):
        k = int(name[8])
        ks = _pairs(a[1], k)
        st = _pairs(a[2], k) if len(a) > 2 and a[2] else ks
        pd = _pairs(a[3], k) if len(a) > 3 else [0] * k
        cm = int(a[4]) if len(a) > 4 else 0
        cip = int(a[5]) if len(a) > 5 else 1
        if len(a) > 6 and a[6] is not None:
            raise UnsupportedOp("avg_pool divisor_override")
        return em.op(node, "AveragePool", [em.vals[a[0]]], {"kernel_shape": ks, "strides": st, "pads": pd * 2,
                                                              "ceil_mode": cm, "count_include_pad": cip})
    if name in ("_adaptive_avg_pool2d", "adaptive_avg_pool2d"):
        if any(int(s) != 1 for s in a[1]):
            raise UnsupportedOp(f"adaptive_avg_pool2d to {list(a[1])} (only 1x1 maps)")
        return em.op(node, "GlobalAveragePool", [em.vals[a[0]]])
    if name in REDUCE:
        x = a[0]
        rank = x.meta["val"].dim()
        dims = a[1] if len(a) > 1 and a[1] is not None else list(range(rank))
        dims = [dims] if isinstance(dims, int) else list(dims) or list(range(rank))
        keep = int(a[2] if len(a) > 2 else kw.get("keepdim", False))
        if kw.get("dtype") is not None:
            raise UnsupportedOp(f"{name} with dtype")
        return em.op(node, REDUCE[name], [em.vals[x], em.i64([d % rank for d in dims], "axes")], {"keepdims": keep})
    if name == "embedding":
        return em.op(node, "Gather", [em.vals[a[0]], em.vals[a[1]]], {"axis": 0})
    if name == "cat":
        dim = a[1] if len(a) > 1 else kw.get("dim", 0)
        return em.op(node, "Concat", [em.vals[t] for t in a[0]], {"axis": dim % meta.dim()})
    if name == "slice":
        x = a[0]
        rank = x.meta["val"].dim()
        dim = a[1] if len(a) > 1 else 0
        start = a[2] if len(a) > 2 and a[2] is not None else 0
        end = a[3] if len(a) > 3 and a[3] is not None else 2**63 - 1
        step = a[4] if len(a) > 4 else 1
        return em.op(node, "Slice", [em.vals[x], em.i64([start], "starts"), em.i64([min(end, 2**63 - 1)], "ends"),
                                     em.i64([dim % rank], "axes"), em.i64([step], "steps")])
    if name == "select":
        x, dim, idx = a
        return em.op(node, "Gather", [em.vals[x], em.const(torch.tensor(idx, dtype=torch.int64), "idx")],
                     {"axis": dim % x.meta["val"].dim()})
    if name == "split_with_sizes":
        x, sizes = a[0], a[1]
        dim = a[2] if len(a) > 2 else 0
        return em.op(node, "Split", [em.vals[x], em.i64(sizes, "split")], {"axis": dim % x.meta["val"].dim()},
                     n_results=len(sizes), metas=list(meta))
    if name in ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size"):
        return None  # checks of the traced metadata: no value
    if name == "ne":
        tdt = next((n.meta["val"].dtype for n in a[:2] if isinstance(n, torch.fx.Node)), odt)
        eq = em.inter(node, "Equal", [_val(em, node, a[0], tdt), _val(em, node, a[1], tdt)], meta)
        return em.op(node, "Not", [eq])
    if name in ("bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"):
        if any(isinstance(x, torch.fx.Node) and x.meta["val"].dtype != torch.bool for x in a[:2]):
            raise UnsupportedOp(f"{name} of integers")
        op = {"bitwise_not": "Not", "bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor"}[name]
        return em.op(node, op, [_val(em, node, x, torch.bool) for x in a[:1 if op == "Not" else 2]])
    if name == "isnan":
        return em.op(node, "IsNaN", [em.vals[a[0]]])
    if name == "silu":
        sg = em.inter(node, "Sigmoid", [em.vals[a[0]]], meta)
        return em.op(node, "Mul", [em.vals[a[0]], sg])
    if name in ("arange", "full", "zeros", "ones", "scalar_tensor", "full_like", "zeros_like", "ones_like",
                "new_ones", "new_zeros", "new_full", "empty", "empty_like", "new_empty"):
        if name == "arange":
            nums = [x for x in a if not isinstance(x, torch.fx.Node)]
            if len(nums) != len(a):
                raise UnsupportedOp("arange of a traced size")
            t = torch.arange(*nums, dtype=odt)
        else:
            fill = {"full": lambda: a[1], "full_like": lambda: a[1], "new_full": lambda: a[2],
                    "scalar_tensor": lambda: a[0], "ones": lambda: 1, "ones_like": lambda: 1, "new_ones": lambda: 1}
            # empty*: the value is never read before it is written in a functional program; zeros
            t = torch.full(tuple(meta.shape), fill.get(name, lambda: 0)(), dtype=odt)
        if t.shape != meta.shape:
            raise UnsupportedOp(f"{name}: shape {list(t.shape)} against the traced {list(meta.shape)}")
        return em.const(t, node.name)
    if name == "any":
        x = a[0]
        rank = x.meta["val"].dim()
        dims = a[1] if len(a) > 1 else list(range(rank))
        dims = [dims] if isinstance(dims, int) else list(dims)
        keep = int(a[2] if len(a) > 2 else kw.get("keepdim", False))
        xv = em.vals[x]
        if x.meta["val"].dtype != torch.bool:
            z = em.scalar(0, x.meta["val"].dtype)
            xv = em.inter(node, "Not", [em.inter(node, "Equal", [xv, z], _meta(torch.bool, x.meta["val"].shape))], _meta(torch.bool, x.meta["val"].shape))
        f = em.inter(node, "Cast", [xv], _meta(torch.float32, x.meta["val"].shape), {"to": 1})
        mx = em.inter(node, "ReduceMax", [f, em.i64([d % rank for d in dims], "axes")], _meta(torch.float32, meta.shape), {"keepdims": keep})
        return em.op(node, "Greater", [mx, em.scalar(0.0, torch.float32)])
    if name == "as_strided":
        x, size, stride = a[0], list(a[1]), list(a[2])
        off = a[3] if len(a) > 3 else kw.get("storage_offset", 0)
        xs = list(x.meta["val"].shape)
        def contiguous(shape):
            st, acc = [], 1
            for d in reversed(shape):
                st.append(acc)
                acc *= d
            return st[::-1]
        same = lambda shape: all(n == 1 or s == c for n, s, c in zip(shape, stride, contiguous(shape)))
        if (off or 0) != 0 or math.prod(size) != math.prod(xs) or not same(size):
            raise UnsupportedOp(f"as_strided to size {size} stride {stride} offset {off} (only a contiguous view maps)")
        return em.op(node, "Identity" if size == xs else "Reshape", [em.vals[x]] + ([] if size == xs else [em.i64(size)]))
    if name in ("index", "_unsafe_index"):
        x, idx = a[0], list(a[1])
        live = [i for i, t in enumerate(idx) if t is not None]
        if any(idx[i].meta["val"].dtype == torch.bool for i in live):
            raise UnsupportedOp("index by a boolean mask")
        if len(live) == 1:
            return em.op(node, "Gather", [em.vals[x], em.vals[idx[live[0]]]], {"axis": live[0]})
        p0, k = live[0], len(live)
        if live != list(range(p0, p0 + k)):
            raise UnsupportedOp("index tensors on axes that are not adjacent")
        # x[..., i, j, ...] on adjacent axes p0..p0+k-1: the indices broadcast to one shape B and
        # stacked along a new last axis -> GatherND over x with those axes moved first, shape
        # B + pre + rest, then B moved after pre: x.shape[:p0] + B + x.shape[p0+k:]
        b = list(torch.broadcast_shapes(*[tuple(idx[i].meta["val"].shape) for i in live]))
        xm = x.meta["val"]
        src = em.vals[x]
        if p0:
            perm = list(range(p0, p0 + k)) + list(range(p0)) + list(range(p0 + k, xm.dim()))
            src = em.inter(node, "Transpose", [src], _meta(xm.dtype, [xm.shape[d] for d in perm]), {"perm": perm})
        cols = []
        for i in live:
            v = em.vals[idx[i]]
            if idx[i].meta["val"].dtype != torch.int64:
                v = em.inter(node, "Cast", [v], _meta(torch.int64, idx[i].meta["val"].shape), {"to": 7})
            v = em.inter(node, "Expand", [v, em.i64(b)], _meta(torch.int64, b))
            cols.append(em.inter(node, "Reshape", [v, em.i64(b + [1])], _meta(torch.int64, b + [1])))
        nd = em.inter(node, "Concat", cols, _meta(torch.int64, b + [k]), {"axis": len(b)})
        if not p0:
            return em.op(node, "GatherND", [src, nd])
        rest = list(xm.shape[p0 + k:])
        g = em.inter(node, "GatherND", [src, nd], _meta(xm.dtype, b + list(xm.shape[:p0]) + rest))
        nb = len(b)
        perm = list(range(nb, nb + p0)) + list(range(nb)) + list(range(nb + p0, nb + p0 + len(rest)))
        return em.op(node, "Transpose", [g], {"perm": perm})
    if name == "scaled_dot_product_attention":
        return _sdpa(em, node, a, kw, meta)
    if name == "copy":  # copy(dst, src): src cast to dst's dtype and broadcast to its shape
        v = em.vals[a[1]]
        sm = a[1].meta["val"] if isinstance(a[1], torch.fx.Node) else None
        if sm is None:
            v = em.scalar(a[1], odt)
        elif sm.dtype != odt:
            v = em.inter(node, "Cast", [v], _meta(odt, sm.shape), {"to": _ONNX_CODE[odt]})
        if sm is None or list(sm.shape) != list(meta.shape):
            return em.op(node, "Expand", [v, em.i64(meta.shape)])
        return em.op(node, "Identity", [v])
    if name == "_weight_norm_interface":  # (v, g, dim) -> (v * g / ||v|| over the other dims, norm)
        v, g = a[0], a[1]
        dim = a[2] if len(a) > 2 else kw.get("dim", 0)
        vm = v.meta["val"]
        dim %= vm.dim()
        others = [d for d in range(vm.dim()) if d != dim]
        nshape = [vm.shape[d] if d == dim else 1 for d in range(vm.dim())]
        sq = em.inter(node, "Mul", [em.vals[v], em.vals[v]], vm)
        ss = em.inter(node, "ReduceSum", [sq, em.i64(others, "axes")], _meta(vm.dtype, nshape), {"keepdims": 1})
        norm = em.inter(node, "Sqrt", [ss], _meta(vm.dtype, nshape))
        scale = em.inter(node, "Div", [em.vals[g], norm], _meta(vm.dtype, nshape))
        r = em.op(node, "Mul", [em.vals[v], scale], metas=[node.meta["val"][0]])
        return (r, norm)
    if name == "linalg_vector_norm":  # (x, ord=2, dim=None, keepdim=False, *, dtype=None)
        x = a[0]
        xm = x.meta["val"]
        order = a[1] if len(a) > 1 else kw.get("ord", 2)
        dims = a[2] if len(a) > 2 else kw.get("dim")
        keep = int(a[3] if len(a) > 3 else kw.get("keepdim", False))
        if kw.get("dtype") is not None:
            raise UnsupportedOp("linalg_vector_norm with dtype")
        dims = list(range(xm.dim())) if dims is None else ([dims] if isinstance(dims, int) else list(dims))
        axes = em.i64([d % xm.dim() for d in dims], "axes")
        if order == 2:
            sq = em.inter(node, "Mul", [em.vals[x], em.vals[x]], xm)
            ss = em.inter(node, "ReduceSum", [sq, axes], meta, {"keepdims": keep})
            return em.op(node, "Sqrt", [ss])
        ab = em.inter(node, "Abs", [em.vals[x]], xm)
        if order == 1:
            return em.op(node, "ReduceSum", [ab, axes], {"keepdims": keep})
        if order == float("inf"):
            return em.op(node, "ReduceMax", [ab, axes], {"keepdims": keep})
        raise UnsupportedOp(f"linalg_vector_norm of order {order}")
    if name == "slice_scatter":
        x, src = a[0], a[1]
        xm = x.meta["val"]
        dim = (a[2] if len(a) > 2 else kw.get("dim", 0)) % xm.dim()
        n = xm.shape[dim]
        start = a[3] if len(a) > 3 and a[3] is not None else kw.get("start", 0) or 0
        end = a[4] if len(a) > 4 and a[4] is not None else kw.get("end", n)
        step = a[5] if len(a) > 5 else kw.get("step", 1)
        start, end = (max(0, min(n, v + n if v < 0 else v)) for v in (start, end if end is not None else n))
        if step != 1:
            raise UnsupportedOp(f"slice_scatter with step {step}")
        parts = []
        for lo, hi in ((0, start), (end, n)):
            if hi > lo:
                sh = list(xm.shape)
                sh[dim] = hi - lo
                parts.append(em.inter(node, "Slice", [em.vals[x], em.i64([lo], "starts"), em.i64([hi], "ends"),
                                                      em.i64([dim], "axes")], _meta(xm.dtype, sh)))
        parts.insert(1 if start > 0 else 0, em.vals[src])
        if len(parts) == 1:
            return em.op(node, "Identity", parts)
        return em.op(node, "Concat", parts, {"axis": dim})
    if name in ("fmod", "remainder"):
        x, y = _val(em, node, a[0], odt), _val(em, node, a[1], odt)
        q = em.inter(node, "Div", [x, y], meta)
        if odt.is_floating_point:
            if name == "fmod":
                raise UnsupportedOp("fmod of floats")
            q = em.inter(node, "Floor", [q], meta)  # remainder: x - floor(x / y) * y
            return em.op(node, "Sub", [x, em.inter(node, "Mul", [q, y], meta)])
        # integers: Div truncates, so x - (x / y) * y is fmod (the sign of x); remainder takes
        # the sign of y: add y where the two differ and the result is not 0
        t = em.inter(node, "Sub", [x, em.inter(node, "Mul", [q, y], meta)], meta)
        if name == "fmod":
            return em.op(node, "Identity", [t])
        bm = _meta(torch.bool, meta.shape)
        zero = em.scalar(0, odt)
        nz = em.inter(node, "Not", [em.inter(node, "Equal", [t, zero], bm)], bm)
        ym = _meta(torch.bool, a[1].meta["val"].shape if isinstance(a[1], torch.fx.Node) else [])
        diff = em.inter(node, "Xor", [em.inter(node, "Less", [t, zero], bm), em.inter(node, "Less", [y, zero], ym)], bm)
        fix = em.inter(node, "And", [nz, diff], bm)
        return em.op(node, "Where", [fix, em.inter(node, "Add", [t, y], meta), t])
    if name == "index_select":
        x, dim, idx = a
        return em.op(node, "Gather", [em.vals[x], em.vals[idx]], {"axis": dim % x.meta["val"].dim()})
    if name == "gather":
        x, dim, idx = a[0], a[1], a[2]
        return em.op(node, "GatherElements", [em.vals[x], em.vals[idx]], {"axis": dim % x.meta["val"].dim()})
    if name == "native_group_norm":
        x, w, b, _n, c, _hw, groups, eps = a
        xm = x.meta["val"]
        wv = em.vals[w] if w is not None else em.const(torch.ones(c, dtype=xm.dtype), "gn_ones")
        bv = em.vals[b] if b is not None else em.const(torch.zeros(c, dtype=xm.dtype), "gn_zeros")
        r = em.op(node, "GroupNormalization", [em.vals[x], wv, bv], {"num_groups": int(groups), "epsilon": float(eps)},
                  metas=[node.meta["val"][0]])
        return (r, None, None)
    if name in ("upsample_bilinear2d", "upsample_nearest2d", "upsample_bicubic2d"):
        x = a[0]
        out_size = a[1] if len(a) > 1 else kw.get("output_size")
        if name == "upsample_nearest2d":
            scales = a[2] if len(a) > 2 else kw.get("scale_factors")
            attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        else:
            align = a[2] if len(a) > 2 else kw.get("align_corners", False)
            scales = a[3] if len(a) > 3 else kw.get("scale_factors")
            attrs = {"mode": "linear" if "bilinear" in name else "cubic",
                     "coordinate_transformation_mode": "align_corners" if align else "pytorch_half_pixel"}
            if "bicubic" in name:
                attrs["cubic_coeff_a"] = -0.75
        if out_size is None and scales:
            # PyTorch maps coordinates with the given scale (not the size ratio): ONNX scales do too
            sc = em.const(torch.tensor([1.0, 1.0] + [float(v) for v in scales], dtype=torch.float32), "scales")
            return em.op(node, "Resize", [em.vals[x], None, sc], attrs)
        return em.op(node, "Resize", [em.vals[x], None, None, em.i64(meta.shape, "sizes")], attrs)
    if name == "constant_pad_nd":
        x, pad = a[0], list(a[1])
        value = a[2] if len(a) > 2 else kw.get("value", 0)
        rank = x.meta["val"].dim()
        begins, ends = [0] * rank, [0] * rank
        for i in range(len(pad) // 2):  # torch: (last_lo, last_hi, prev_lo, prev_hi, ...)
            begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
        return em.op(node, "Pad", [em.vals[x], em.i64(begins + ends, "pads"), em.scalar(value, odt)], {"mode": "constant"})
    if name == "roll":
        x = a[0]
        shifts = a[1] if isinstance(a[1], (list, tuple)) else [a[1]]
        dims = a[2] if len(a) > 2 else kw.get("dims", [])
        dims = dims if isinstance(dims, (list, tuple)) else [dims]
        if not dims:
            raise UnsupportedOp("roll of the flattened tensor")
        v, xm = em.vals[x], x.meta["val"]
        for k, (sh, d) in enumerate(zip(shifts, dims)):
            d %= xm.dim()
            n = xm.shape[d]
            sh %= n
            if sh == 0:
                continue
            lo_shape, hi_shape = list(xm.shape), list(xm.shape)
            lo_shape[d], hi_shape[d] = sh, n - sh
            tail = em.inter(node, "Slice", [v, em.i64([n - sh], "starts"), em.i64([n], "ends"), em.i64([d], "axes")],
                            _meta(xm.dtype, lo_shape))
            head = em.inter(node, "Slice", [v, em.i64([0], "starts"), em.i64([n - sh], "ends"), em.i64([d], "axes")],
                            _meta(xm.dtype, hi_shape))
            v = em.inter(node, "Concat", [tail, head], xm, {"axis": d})
        return em.op(node, "Identity", [v])
    if name in ("split", "unbind"):
        x = a[0]
        xm = x.meta["val"]
        dim = (a[2] if len(a) > 2 else kw.get("dim", 0)) if name == "split" else (a[1] if len(a) > 1 else kw.get("dim", 0))
        dim %= xm.dim()
        if name == "unbind":
            return tuple(em.inter(node, "Gather", [em.vals[x], em.const(torch.tensor(i, dtype=torch.int64), "idx")], m,
                                  {"axis": dim}) for i, m in enumerate(meta))
        sizes = [m.shape[dim] for m in meta]
        return em.op(node, "Split", [em.vals[x], em.i64(sizes, "split")], {"axis": dim}, n_results=len(sizes), metas=list(meta))
    if name in ("clamp_min", "clamp_max"):
        lim = em.scalar(a[1], odt)
        return em.op(node, "Clip", [em.vals[a[0]], lim if name == "clamp_min" else None, lim if name == "clamp_max" else None])
    if name in ("tril", "triu"):
        k = a[1] if len(a) > 1 else kw.get("diagonal", 0)
        return em.op(node, "Trilu", [em.vals[a[0]], em.const(torch.tensor(k, dtype=torch.int64), "k")],
                     {"upper": int(name == "triu")})
    if name == "cumsum":
        x, dim = a[0], a[1]
        xv = em.vals[x]
        if x.meta["val"].dtype != odt:
            xv = em.inter(node, "Cast", [xv], meta, {"to": _ONNX_CODE[odt]})
        return em.op(node, "CumSum", [xv, em.const(torch.tensor(dim % meta.dim(), dtype=torch.int64), "axis")])
    if name in ("argmax", "argmin"):
        x = a[0]
        dim = a[1] if len(a) > 1 else kw.get("dim")
        if dim is None:
            raise UnsupportedOp(f"{name} over the flattened tensor")
        keep = int(a[2] if len(a) > 2 else kw.get("keepdim", False))
        return em.op(node, "ArgMax" if name == "argmax" else "ArgMin", [em.vals[x]],
                     {"axis": dim % x.meta["val"].dim(), "keepdims": keep})
    raise UnsupportedOp("no mapping")


_ONNX_CODE = {torch.float32: 1, torch.uint8: 2, torch.int8: 3, torch.int16: 5, torch.int32: 6, torch.int64: 7,
              torch.bool: 9, torch.float16: 10, torch.float64: 11, torch.bfloat16: 16}


def program_to_drkg(ep, drkg_path, graph_name="main", decompose=True):
    """Writes drkg_path and its sidecar (same stem, .safetensors). Returns the sidecar's path."""
    if decompose:
        # scaled_dot_product_attention is kept whole and written as the attention pattern the
        # fuse pass takes into one flash kernel (its decomposition, bmm on expanded views and
        # the safe softmax's any/where, is not matched)
        table = None
        if hasattr(torch.export, "default_decompositions"):
            table = torch.export.default_decompositions()
            table.pop(torch.ops.aten.scaled_dot_product_attention.default, None)
        ep = ep.run_decompositions(table) if table is not None else ep.run_decompositions()
    sig = ep.graph_signature
    weight_of = {}
    weight_of.update(sig.inputs_to_parameters)
    weight_of.update(sig.inputs_to_buffers)
    weight_of.update(getattr(sig, "inputs_to_lifted_tensor_constants", {}))
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}))
    em = _Emitter(ep)
    params = []
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            v = node.meta["val"]
            if node.name in weight_of:
                key = weight_of[node.name]
                t = state[key]
                if not isinstance(t, torch.Tensor):
                    raise UnsupportedOp(f"constant {key} is not a tensor")
                em.weights[key] = t
                n = em.fresh(node.name)
                em.weight_of[node] = (key, len(em.consts))
                em.consts.append(f"  {_vname(n)}: {_type(t.dtype, t.shape)} = const weights {_quote(key)}")
                em.vals[node] = n
            elif isinstance(v, torch.Tensor):
                n = em.fresh(node.name)
                params.append(f"{_vname(n)}: {_type(v.dtype, v.shape)}")
                em.vals[node] = n
            else:
                raise UnsupportedOp(f"placeholder {node.name}: non-tensor user input {v!r}")
        elif node.op == "call_function":
            try:
                em.vals[node] = _convert(em, node)
            except UnsupportedOp as e:
                raise UnsupportedOp(f"torch2drkg: FX node '{node.name}' (target {node.target}): {e}") from None
        elif node.op == "output":
            outs = [em.vals[o] for o in node.args[0]]
        else:
            raise UnsupportedOp(f"torch2drkg: FX node '{node.name}': unsupported node kind {node.op}")
    side = os.path.splitext(drkg_path)[0] + ".safetensors"
    write_safetensors(side, em.weights)
    gname = graph_name if _bare(graph_name) else _quote(graph_name)
    with open(drkg_path, "w") as f:
        f.write("# written by drkc tools/torch2drkg.py from a torch.export program\n")
        f.write(f"weights {_quote(os.path.basename(side))}\n")
        f.write(f"graph @{gname}({', '.join(params)}) -> ({', '.join(_vname(o) for o in outs)}) {{\n")
        for line in em.consts + em.lines:
            f.write(line + "\n")
        f.write(f"  return {', '.join(_vname(o) for o in outs)}\n}}\n")
    return side


def export_drkg(model, args, drkg_path, graph_name="main", **export_kw):
    model = model.eval()
    with torch.no_grad():
        ep = torch.export.export(model, tuple(args), **export_kw)
    return program_to_drkg(ep, drkg_path, graph_name)


def main(argv):
    import argparse
    import importlib

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("factory", help="MODULE:FUNCTION returning the nn.Module")
    ap.add_argument("out", help="output .drkg (the sidecar is written next to it)")
    ap.add_argument("--shape", action="append", required=True, help="an input's shape, e.g. 1,3,32,32")
    o = ap.parse_args(argv)
    mod, fn = o.factory.split(":")
    model = getattr(importlib.import_module(mod), fn)()
    args = [torch.randn(*[int(d) for d in s.split(",")]) for s in o.shape]
    try:
        side = export_drkg(model, args, o.out)
    except UnsupportedOp as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {o.out} and {side}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
