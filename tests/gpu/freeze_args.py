#!/usr/bin/env python3
"""Prints the drkc --freeze-input options that specialize an ONNX test case on its
shape-like inputs (integer inputs after the first graph input, small integer inputs, and
the SHAPE_LIKE positions),
one per line, taking the values from the case's test_data_set_0. With IN_DIR (not '-'), the
frozen inputs' files are removed from IN_DIR and the rest renumbered, so that IN_DIR matches
the compiled module's inputs.

usage: freeze_args.py MODEL.onnx TEST_DATA_DIR IN_DIR|-"""
import os
import sys

import onnx

INT_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
# inputs that decide shapes or indexing, by op (positions); integer inputs after the first
# graph input are frozen too
SHAPE_LIKE = {"Resize": (1, 2, 3), "OneHot": (1,), "Range": (0, 1, 2), "ConstantOfShape": (0,),
              "TopK": (1,), "Trilu": (1,), "CumSum": (1,), "Pad": (1, 2, 3)}
SMALL = 64  # integer graph inputs of at most this many elements decide shapes too (a window's size)


def main():
    model_path, data_dir, in_dir = sys.argv[1:4]
    g = onnx.load(model_path, load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    shape_like = set()
    for n in g.node:
        for k, name in enumerate(n.input):
            if name and k in SHAPE_LIKE.get(n.op_type, ()):
                shape_like.add(name)
    frozen = []
    for idx, v in enumerate(inputs):
        is_int = v.type.tensor_type.elem_type in INT_TYPES
        dims = v.type.tensor_type.shape.dim
        small = all(d.HasField("dim_value") for d in dims) and \
            int(__import__("math").prod(d.dim_value for d in dims)) <= SMALL
        if v.name in shape_like or (is_int and (idx > 0 or small)):
            frozen.append(idx)
    if not frozen:
        return 1
    for idx in frozen:
        print(f"--freeze-input={inputs[idx].name}={os.path.join(data_dir, f'input_{idx}.pb')}")
    if in_dir != "-":
        keep = [i for i in range(len(inputs)) if i not in frozen]
        files = {i: os.path.join(in_dir, f"input_{i}.pb") for i in range(len(inputs))}
        for i in frozen:
            if os.path.exists(files[i]):
                os.remove(files[i])
        for new, old in enumerate(keep):
            if new != old and os.path.exists(files[old]):
                os.rename(files[old], os.path.join(in_dir, f"input_{new}.pb"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
