"""Writes gguf_py_small.gguf with llama.cpp's gguf-py, as an independent reference for
tests/gguf_py.rs. Run with a Python that has `gguf` and `numpy`:
    python make_gguf_py_small.py gguf_py_small.gguf
"""
import sys

import gguf
import numpy as np

w = gguf.GGUFWriter(sys.argv[1], "llama")
w.add_uint8("t.u8", 200)
w.add_int8("t.i8", -7)
w.add_uint16("t.u16", 60000)
w.add_int16("t.i16", -1234)
w.add_uint32("t.u32", 3000000000)
w.add_int32("t.i32", -2000000000)
w.add_float32("t.f32", 0.125)
w.add_uint64("t.u64", 2**63 + 5)
w.add_int64("t.i64", -(2**40))
w.add_float64("t.f64", -2.5)
w.add_bool("t.bool", True)
w.add_string("t.str", "héllo ▁world")
w.add_array("t.strs", ["<s>", "▁a", ""])
w.add_array("t.ints", [1, -2, 3])
w.add_array("t.floats", [0.5, -1.0])
w.add_array("t.bools", [True, False])
w.add_array("t.nested", [[1, 2], ["x"]])
w.add_tensor("f32", np.arange(6, dtype=np.float32).reshape(2, 3))
w.add_tensor("f16", np.array([1.0, -2.0, 0.5], dtype=np.float16))
w.add_tensor("i32", np.array([7, -8], dtype=np.int32))
w.add_tensor("q8", np.arange(34, dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
