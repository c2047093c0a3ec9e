"""A tiny grayscale PNG encoder and decoder (zlib + struct), so the demo needs no imaging library.

Only what the demo needs: 8-bit grayscale, no interlace, filter type 0 on write; the decoder
accepts what the encoder writes (and any 8-bit grayscale PNG whose rows use filter 0..4).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from labledger.errors import PNGError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_gray_png(pixels: np.ndarray) -> bytes:
    """Encode a 2-D array of 0..255 values as an 8-bit grayscale PNG.

    >>> data = encode_gray_png(np.zeros((2, 3), dtype=np.uint8))
    >>> data[:8] == PNG_SIGNATURE, decode_gray_png(data).shape
    (True, (2, 3))
    """
    arr = np.asarray(pixels)
    if arr.ndim != 2 or arr.size == 0:
        raise PNGError(f"a PNG needs a non-empty 2-D array of pixels; got shape {arr.shape}")
    if arr.dtype != np.uint8:
        if arr.min() < 0 or arr.max() > 255:
            raise PNGError("pixel values must lie in 0..255")
        arr = arr.astype(np.uint8)
    height, width = arr.shape
    raw = np.zeros((height, width + 1), dtype=np.uint8)  # filter byte 0 before every row
    raw[:, 1:] = arr
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw.tobytes(), 9))
        + _chunk(b"IEND", b"")
    )


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_gray_png(data: bytes) -> np.ndarray:
    """Decode an 8-bit grayscale PNG into a ``(height, width)`` uint8 array (checks every CRC).

    >>> decode_gray_png(encode_gray_png(np.full((1, 2), 7))).tolist()
    [[7, 7]]
    """
    if not data.startswith(PNG_SIGNATURE):
        raise PNGError("not a PNG: the 8-byte signature is missing")
    pos, header, idat = len(PNG_SIGNATURE), None, []
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        crc_bytes = data[pos + 8 + length : pos + 12 + length]
        if len(body) != length or len(crc_bytes) != 4:
            raise PNGError(f"PNG chunk {kind!r} at byte {pos} is truncated")
        if struct.unpack(">I", crc_bytes)[0] != zlib.crc32(kind + body):
            raise PNGError(f"PNG chunk {kind!r} at byte {pos} has a bad CRC")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None:
        raise PNGError("PNG has no IHDR chunk")
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color != 0 or interlace != 0:
        raise PNGError(
            f"only 8-bit grayscale non-interlaced PNGs are supported; got bit depth "
            f"{depth}, colour type {color}, interlace {interlace}"
        )
    raw = zlib.decompress(b"".join(idat))
    if len(raw) != height * (width + 1):
        raise PNGError(f"PNG pixel data has {len(raw)} bytes; expected {height * (width + 1)}")
    out = np.zeros((height, width), dtype=np.uint8)
    prev = [0] * width
    for y in range(height):
        kind = raw[y * (width + 1)]
        line = list(raw[y * (width + 1) + 1 : (y + 1) * (width + 1)])
        for x in range(width):
            left = line[x - 1] if x else 0
            up_left = prev[x - 1] if x else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + prev[x]) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + prev[x]) // 2) & 255
            elif kind == 4:
                line[x] = (line[x] + _paeth(left, prev[x], up_left)) & 255
            elif kind != 0:
                raise PNGError(f"PNG row {y} uses unknown filter type {kind}")
        out[y] = line
        prev = line
    return out


def digit_png(image: np.ndarray, *, scale: int = 4, max_value: float = 16.0) -> bytes:
    """Render one ``load_digits`` 8x8 image (values 0..16) as a ``8*scale`` square grayscale PNG.

    Ink is white on black, as in the data (0 = background); nearest-neighbour upscaling keeps every
    original pixel visible as a ``scale x scale`` block.

    >>> decode_gray_png(digit_png(np.eye(8) * 16, scale=4)).shape
    (32, 32)
    """
    arr = np.asarray(image, dtype=np.float64)
    pixels = np.clip(np.rint(arr * (255.0 / max_value)), 0, 255).astype(np.uint8)
    return encode_gray_png(np.kron(pixels, np.ones((scale, scale), dtype=np.uint8)))
