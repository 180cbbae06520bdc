"""Writes small.gguf, the GGUF fixture of test_gguf.cpp, with the `gguf` PyPI package (the
llama.cpp project's own writer), so the C++ reader is checked against an independent writer.
Run from this folder: python3 make_small_gguf.py"""
import numpy as np
import gguf

w = gguf.GGUFWriter("small.gguf", "flint")
w.add_uint32("flint.block_count", 7)
w.add_int32("test.i32", -5)
w.add_uint64("test.u64", 1 << 40)
w.add_float32("flint.attention.layer_norm_rms_epsilon", 1e-6)
w.add_float64("test.f64", 2.5)
w.add_bool("test.bool", True)
w.add_string("general.name", "small")
w.add_array("test.strings", ["a", "", "ccc"])
w.add_array("test.ints", [1, -2, 3])
w.add_array("test.floats", [0.5, 1.5])
w.add_tensor("f32", np.arange(6, dtype=np.float32).reshape(2, 3))
w.add_tensor("bf16", np.arange(4 * 64, dtype=np.uint16).reshape(4, 64), raw_dtype=gguf.GGMLQuantizationType.BF16)
blocks = np.arange(2 * 36, dtype=np.uint8).reshape(2, 36)  # 2 rows of one 64-weight NVFP4 block
w.add_tensor("blk.0.ffn_down_exps.weight", blocks, raw_dtype=gguf.GGMLQuantizationType.NVFP4)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
