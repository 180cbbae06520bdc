"""Independent NVFP4 reference (written from FLINT.md §3 and reference/formats.md §3-§4).

Used by tests/cpp/nvfp4: `python3 nvfp4_reference.py BLOCKS IN SCALE2 OUT_PREFIX` reads ggml blocks
(rows x in/64 x 36 bytes), writes OUT_PREFIX.ref.f32 (our own dequantisation), OUT_PREFIX.gguf.f32
(gguf-py's dequantiser, times scale2), OUT_PREFIX.codes / .scales (the NVIDIA split layout).
"""
import sys

import numpy as np

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def e4m3_unsigned(byte: int) -> float:
    """UE4M3 as ggml decodes it: sign bit ignored, 0x00 and 0x7F (NaN) are 0."""
    if byte in (0, 0x7F):
        return 0.0
    e, m = (byte >> 3) & 0xF, byte & 7
    return m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


def dequantize(blocks: np.ndarray, scale2: float) -> np.ndarray:
    rows, nb, _ = blocks.shape
    out = np.zeros((rows, nb * 64), dtype=np.float32)
    scale_table = np.array([e4m3_unsigned(b) for b in range(256)], dtype=np.float32)
    for s in range(4):
        d = scale_table[blocks[:, :, s]]                       # [rows, nb]
        for j in range(8):
            q = blocks[:, :, 4 + 8 * s + j]
            lo = E2M1[q & 0xF] * d
            hi = E2M1[q >> 4] * d
            out[:, 16 * s + j::64] = lo * np.float32(scale2)
            out[:, 16 * s + j + 8::64] = hi * np.float32(scale2)
    return out


def to_split(blocks: np.ndarray):
    rows, nb, _ = blocks.shape
    scales = blocks[:, :, :4].reshape(rows, nb * 4)
    qs = blocks[:, :, 4:].reshape(rows, nb, 4, 8)
    codes16 = np.concatenate([qs & 0xF, qs >> 4], axis=-1)      # element 16s+j for j<16
    codes16 = codes16.reshape(rows, nb * 64)
    packed = (codes16[:, 0::2] | (codes16[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales


def main():
    path, n_in, scale2, prefix = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    raw = np.fromfile(path, dtype=np.uint8)
    blocks = raw.reshape(-1, n_in // 64, 36)
    dequantize(blocks, scale2).astype(np.float32).tofile(prefix + ".ref.f32")
    from gguf.quants import NVFP4  # gguf-py's own dequantiser (llama.cpp project)
    g = NVFP4.dequantize_blocks(raw.reshape(-1, 36)).reshape(blocks.shape[0], -1)
    (g.astype(np.float32) * np.float32(scale2)).tofile(prefix + ".gguf.f32")
    codes, scales = to_split(blocks)
    codes.tofile(prefix + ".codes")
    scales.tofile(prefix + ".scales")


if __name__ == "__main__":
    main()
