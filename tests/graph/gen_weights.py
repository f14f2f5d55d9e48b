#!/usr/bin/env python3
"""Writes the safetensors sidecars of the weights_*.drkg / err_weights_*.drkg tests (checked in;
re-run after changing this). Standard library only.

weights.safetensors: w f32[2,3] = 1..6, b f32[3] = [0.5, -1, 2], idx i64[2] = [3, -4],
mis f32[2] = [7, 8] stored one byte past an aligned offset (the reader must copy it), after
pad u8[1]. bad_range.safetensors: one tensor whose data_offsets run past the end of the file."""
import json
import os
import struct


def write(path, tensors, extra=b"", header_override=None):
    header, blob = {"__metadata__": {"format": "pt"}}, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if header_override:
        header.update(header_override)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)  # tensor data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob + extra)


here = os.path.dirname(os.path.abspath(__file__))
write(os.path.join(here, "weights.safetensors"), [
    ("w", "F32", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
    ("b", "F32", [3], struct.pack("<3f", 0.5, -1, 2)),
    ("idx", "I64", [2], struct.pack("<2q", 3, -4)),
    ("pad", "U8", [1], b"\x09"),
    ("mis", "F32", [2], struct.pack("<2f", 7, 8)),
])
write(os.path.join(here, "bad_range.safetensors"), [("w", "F32", [2], struct.pack("<2f", 1, 2))],
      header_override={"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})
