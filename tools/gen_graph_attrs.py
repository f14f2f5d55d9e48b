#!/usr/bin/env python3
"""Writes ir/graph_attrs.def, the attribute table of the graph IR ops, from the ONNX schemas of
the installed onnx package (names, kinds, required, the opset that introduced each one) and the
value rules below (the ones ONNX Runtime enforces and the interpreter and lowering rely on).

Graph IR ops have opset-21 semantics (ir/graph_ops.def); the importer rewrites older forms and
consumes the attributes of those forms (Reshape's `shape`, Add's `broadcast`, ...), so the table
holds each op's opset-21 attributes plus those of opsets 22-25 the importer passes on. Run it
again when ir/graph_ops.def gains an op:  python3 tools/gen_graph_attrs.py > ir/graph_attrs.def
"""
import re
import sys
from pathlib import Path

import onnx.defs as D

ROOT = Path(__file__).resolve().parent.parent
KIND = {"INT": "INT", "FLOAT": "FLOAT", "STRING": "STRING", "INTS": "INTS", "FLOATS": "FLOATS",
        "STRINGS": "STRINGS", "TENSOR": "TENSOR"}
AUTO_PAD = "NOTSET|SAME_UPPER|SAME_LOWER|VALID"
CONV = {"strides": ("SPATIAL", None), "dilations": ("SPATIAL", None), "kernel_shape": ("KSHAPE", None),
        "pads": ("PADS", None), "group": ("POS", None), "auto_pad": ("ENUM", AUTO_PAD),
        "output_padding": ("SPATIAL0", None),
        # exporters also write the full [N, C, spatial...] form; only the values are checked
        "output_shape": ("NONNEG", None)}
POOL = {"strides": ("SPATIAL", None), "dilations": ("SPATIAL", None), "kernel_shape": ("SPATIAL", None),
        "pads": ("PADS", None), "auto_pad": ("ENUM", AUTO_PAD), "ceil_mode": ("BOOL", None),
        "count_include_pad": ("BOOL", None), "storage_order": ("BOOL", None)}
# (rule, allowed strings) by op, then for every op
RULES = {
    "Conv": CONV, "ConvTranspose": CONV, "MaxPool": POOL, "AveragePool": POOL,
    "Resize": {"mode": ("ENUM", "nearest|linear|cubic"),
               "coordinate_transformation_mode": ("ENUM", "half_pixel|half_pixel_symmetric|pytorch_half_pixel|"
                                                  "align_corners|asymmetric|tf_crop_and_resize|"
                                                  "tf_half_pixel_for_nn"),  # opsets 11-18: drkc reads it
               "nearest_mode": ("ENUM", "round_prefer_floor|round_prefer_ceil|floor|ceil"),
               "keep_aspect_ratio_policy": ("ENUM", "stretch|not_larger|not_smaller")},
    "Pad": {"mode": ("ENUM", "constant|reflect|edge|wrap")},
    "DepthToSpace": {"mode": ("ENUM", "DCR|CRD"), "blocksize": ("POS", None)},
    "SpaceToDepth": {"blocksize": ("POS", None)},
    "Gelu": {"approximate": ("ENUM", "none|tanh")},
    "ScatterND": {"reduction": ("ENUM", "none|add|mul|max|min")},
    "Split": {"num_outputs": ("POS", None)},
    "GroupNormalization": {"num_groups": ("POS", None)},
    "Cast": {"to": ("DTYPE", None), "round_mode": ("ENUM", "up|down|nearest")},
    "CastLike": {"round_mode": ("ENUM", "up|down|nearest")},
}
# drkc's own graph IR attributes: the reductions' `axes` as an attribute (the form of opsets
# before 13/18, which the layout pass also writes; the interpreter and lowering read either).
EXTRA = {op: {"axes": ("INTS", "ANY", 1)} for op in (
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare",
    "ReduceLogSumExp")}
# pad-matmul-n's `result_n` (the unpadded N a MatMul of a padded weight stores): internal, so its
# opset is past every real one and the importer refuses it in a model
INTERNAL_OPSET = 1000
EXTRA["MatMul"] = {"result_n": ("INT", "POS", INTERNAL_OPSET)}
# precision auto's `tf32` (an f32 MatMul/Gemm/Conv chosen to run on tf32 tensor cores; the
# interpreter rounds its operands to tf32): internal too
for _op in ("MatMul", "Gemm", "Conv"):
    EXTRA.setdefault(_op, {})["tf32"] = ("INT", "BOOL", INTERNAL_OPSET)
# drkc's own ops without an ai.onnx schema: their rows (name, kind, rule, required), all internal
OWN = {"MatMulNBits": [("block_size", "INT", "POS", True), ("packing", "INT", "BOOL", False)]}
BOOLS = {"keepdims", "noop_with_empty_axes", "select_last_index", "largest", "sorted", "exclusive", "reverse",
         "upper", "transA", "transB", "allowzero", "training_mode", "saturate", "detect_negative",
         "detect_positive", "ceil_mode", "count_include_pad", "exclude_outside", "antialias"}


def versions(op):
    out = []
    for v in range(1, 26):
        try:
            s = D.get_schema(op, v)
        except Exception:
            continue
        if s.since_version == v:
            out.append(s)
    return out


def main():
    ops = re.findall(r"(?m)^DRK_OP\((\w+), (\w+),", (ROOT / "ir/graph_ops.def").read_text())
    w = sys.stdout.write
    w("/* The attributes of every graph IR op, defined once: names, kinds, whether required, the\n"
      " * opset that introduced each (the importer refuses one a model's opset does not have yet) and\n"
      " * the rule its value must meet. Read by ir/graph_attrs.c (the verifier's attribute checks,\n"
      " * shared by the interpreter and the compile path) and the .drkg parser (kinds of numbers).\n"
      " * Written by tools/gen_graph_attrs.py from the onnx package's schemas and its rule list;\n"
      " * edit that script, not this file. The channels-last ops take their ONNX op's rows.\n"
      " *\n"
      " * DRK_ATTR(OP, name, KIND, RULE, allowed strings or NULL, since opset, required)\n"
      " * RULE: ANY; POS / NONNEG / BOOL (every element > 0 / >= 0 / 0 or 1); SPATIAL (one value > 0\n"
      " * per spatial dim of input 0); SPATIAL0 (one value >= 0 per spatial dim); PADS (two values >= 0\n"
      " * per spatial dim); KSHAPE (SPATIAL, equal to W's spatial dims); DTYPE (an ONNX dtype code drkc\n"
      " * knows); ENUM (one of the allowed strings). */\n")
    for enum, op in ops:
        if op.endswith("NHWC"):
            continue
        if op in OWN:
            for name, kind, rule, required in OWN[op]:
                w("DRK_ATTR(%s, %s, %s, %s, NULL, %d, %s)\n" % (enum, name, kind, rule, INTERNAL_OPSET,
                                                                "true" if required else "false"))
            continue
        vs = versions(op)
        s21 = D.get_schema(op, 21)
        names = dict(s21.attributes)
        for s in vs:
            if s.since_version > 21:
                for k, a in s.attributes.items():
                    names.setdefault(k, a)
        rows = []
        for name in names:
            a = names[name]
            rows.append((name, KIND[a.type.name], min(s.since_version for s in vs if name in s.attributes), a.required))
        for name, (kind, rule, since) in EXTRA.get(op, {}).items():
            if name not in names:
                rows.append((name, kind, since, False))
        for name, kind, since, required in sorted(rows):
            rule, allowed = RULES.get(op, {}).get(name, ("BOOL", None) if name in BOOLS and kind == "INT"
                                                  else ("ANY", None))
            req = "true" if required else "false"
            al = '"%s"' % allowed if allowed else "NULL"
            w("DRK_ATTR(%s, %s, %s, %s, %s, %d, %s)\n" % (enum, name, kind, rule, al, since, req))


main()
