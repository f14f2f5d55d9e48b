"""The test data a case generator writes beside its model: OUT/test_data_set_0/input_N.pb (the
feeds, in the model's input order) and output_N.pb (the expected outputs), as run_case.py's
CHECK-DATA reads them. Imported by the *.onnx.py generators (their own folder is on sys.path)."""
import os

import numpy as np
from onnx import numpy_helper


def write_test_data(out, names, feeds, outputs, out_dtype=None):
    d = os.path.join(out, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    for i, n in enumerate(names):
        open(os.path.join(d, f"input_{i}.pb"), "wb").write(numpy_helper.from_array(feeds[n], n).SerializeToString())
    for i, r in enumerate(outputs):
        open(os.path.join(d, f"output_{i}.pb"), "wb").write(
            numpy_helper.from_array(np.asarray(r, out_dtype), f"o{i}").SerializeToString())
