"""Chunk payload codec: columnar numpy arrays in msgpack, with dtypes from a fixed allow-list.

Never pickle: a payload is plain msgpack maps, strings, numbers and raw bytes, so loading a file from a
compromised collector can at worst fail validation, never run code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

FORMAT = "rlfleet.chunk"
VERSION = 1
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
_DTYPES = {"float32", "float64", "int64", "int32", "uint8", "bool"}


class PayloadError(ValueError):
    """The bytes are not a valid rlfleet chunk payload."""


def encode_chunk(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any] | None = None) -> bytes:
    body = {}
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype.name not in _DTYPES:
            raise PayloadError(f"array {name!r} has dtype {arr.dtype.name}; allowed: {sorted(_DTYPES)}")
        body[name] = {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": arr.tobytes()}
    doc = {"format": FORMAT, "version": VERSION, "meta": dict(meta or {}), "arrays": body}
    return msgpack.packb(doc, use_bin_type=True)


def _no_ext(code: int, data: bytes) -> Any:
    raise PayloadError(f"msgpack extension type {code} is not allowed in payloads")


def decode_chunk(raw: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Decode and validate; raises PayloadError on anything unexpected (truncation, bad dtype, bad shape)."""
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"payload of {len(raw)} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte limit")
    try:
        doc = msgpack.unpackb(raw, raw=False, strict_map_key=True, ext_hook=_no_ext)
    except PayloadError:
        raise
    except Exception as exc:  # msgpack raises several unrelated types for corrupt input
        raise PayloadError(f"not a valid msgpack document: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise PayloadError(f"not an {FORMAT} v{VERSION} payload")
    meta, body = doc.get("meta"), doc.get("arrays")
    if not isinstance(meta, dict) or not isinstance(body, dict):
        raise PayloadError("payload lacks 'meta' and 'arrays' maps")
    arrays = {}
    for name, spec in body.items():
        if not isinstance(spec, dict):
            raise PayloadError(f"array {name!r} is not a map")
        dtype, shape, data = spec.get("dtype"), spec.get("shape"), spec.get("data")
        if dtype not in _DTYPES:
            raise PayloadError(f"array {name!r} has dtype {dtype!r}; allowed: {sorted(_DTYPES)}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise PayloadError(f"array {name!r} has an invalid shape {shape!r}")
        if not isinstance(data, bytes):
            raise PayloadError(f"array {name!r} data is not raw bytes")
        expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if expected != len(data):
            raise PayloadError(f"array {name!r}: shape {shape} x {dtype} needs {expected} bytes, got {len(data)}")
        arrays[name] = np.frombuffer(data, dtype=dtype).reshape(shape)
    return arrays, meta
