"""Decodes the PNGs Chromium writes (8-bit RGB/RGBA, not interlaced) with the standard library, so a
screenshot can be checked for content without an imaging package."""
import struct
import zlib


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(data: bytes):
    """(width, height, channels, rows): rows are bytearrays of width*channels samples."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(color)
    assert depth == 8 and channels and interlace == 0, f"unsupported PNG: depth {depth}, color type {color}"
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up_left = prev[i - channels] if i >= channels else 0
            predictor = (0, left, prev[i], (left + prev[i]) // 2, _paeth(left, prev[i], up_left))[kind]
            line[i] = (line[i] + predictor) & 0xFF
        rows.append(line)
        prev = line
    return width, height, channels, rows


def luminance_stats(data: bytes, step: int = 4):
    """(variance of grey levels, number of distinct colours) over every step-th pixel of every step-th row."""
    width, height, channels, rows = decode(data)
    greys, colours = [], set()
    for y in range(0, height, step):
        row = rows[y]
        for x in range(0, width, step):
            r, g, b = row[x * channels:x * channels + 3]
            greys.append((299 * r + 587 * g + 114 * b) / 1000)
            colours.add((r, g, b))
    mean = sum(greys) / len(greys)
    return sum((v - mean) ** 2 for v in greys) / len(greys), len(colours)
