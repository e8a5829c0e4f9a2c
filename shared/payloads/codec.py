"""Chunk payload codec: columnar numpy arrays in msgpack, with dtypes from a fixed allow-list.

Never pickle: a payload is plain msgpack maps, strings, numbers and raw bytes, so loading a file from a
compromised collector can at worst fail validation, never run code.

An array's bytes may be zstd-compressed (`compression: zstd` in its map, through the `zstandard` package): pixel
frames shrink several-fold. Its decompressed size is declared in the zstd frame and must be exactly the array's, and
all arrays together may not decompress beyond MAX_PAYLOAD_BYTES, so a small file cannot expand into a large
allocation (a zip bomb)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import msgpack
import numpy as np
import zstandard

FORMAT = "rlfleet.chunk"
VERSION = 1
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
# A payload holds a handful of maps and short lists (columns, their specs and shapes, a few meta values); its bulk
# is in raw bytes, which decode at their own size. Small objects do not: a nil is one byte on disk and a pointer
# (eight) in a Python list, so a 20 MB array of nils would become 160 MB before any check could refuse it. No one
# map or list may hold more than MAX_CONTAINER_LEN entries, and all of them together no more than MAX_ENTRIES:
# decoding stops at the first container past either bound.
MAX_CONTAINER_LEN = 1024
MAX_ENTRIES = 16_384
DTYPES = {"float32", "float64", "int64", "int32", "int16", "int8", "uint8", "bool"}
Compression = Literal["none", "zstd"]
# Arrays smaller than this are stored as they are: a zstd frame's header and the call cost more than they save.
MIN_COMPRESSED_BYTES = 4096
ZSTD_LEVEL = 1  # docs/performance.md: level 3 saves a few percent more bytes at twice level 1's time


class PayloadError(ValueError):
    """The bytes are not a valid rlfleet chunk payload."""


def encode_chunk(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any] | None = None,
                 compression: Compression = "none", level: int = ZSTD_LEVEL) -> bytes:
    """The payload; with `compression="zstd"` each array of at least MIN_COMPRESSED_BYTES that zstd makes smaller
    is stored compressed (its map says so)."""
    compressor = zstandard.ZstdCompressor(level=level) if compression == "zstd" else None
    body = {}
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if arr.dtype.name not in DTYPES:
            raise PayloadError(f"array {name!r} has dtype {arr.dtype.name}; allowed: {sorted(DTYPES)}")
        # Payloads are little-endian whatever the writer's byte order; tobytes() copies in C order (0-d too).
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        spec: dict[str, Any] = {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": arr.tobytes()}
        if compressor is not None and arr.nbytes >= MIN_COMPRESSED_BYTES:
            packed = compressor.compress(spec["data"])  # declares the content size in the frame header
            if len(packed) < arr.nbytes:
                spec.update(data=packed, compression="zstd")
        body[name] = spec
    doc = {"format": FORMAT, "version": VERSION, "meta": dict(meta or {}), "arrays": body}
    return msgpack.packb(doc, use_bin_type=True)


def _decompressed(name: str, data: bytes, expected: int) -> bytes:
    """The array's bytes from its zstd frame, which must declare exactly `expected` bytes: zstandard allocates
    what the frame declares, so the size is checked before anything is decompressed."""
    try:
        declared = zstandard.frame_content_size(data)
        if declared != expected:
            raise PayloadError(f"array {name!r}: its zstd frame declares {declared} bytes (-1: none), its shape and "
                               f"dtype need {expected}")
        out: bytes = zstandard.ZstdDecompressor().decompress(data, max_output_size=expected)
    except zstandard.ZstdError as exc:
        raise PayloadError(f"array {name!r}: not a valid zstd frame: {exc}") from exc
    if len(out) != expected:
        raise PayloadError(f"array {name!r}: decompressed to {len(out)} bytes, its shape and dtype need {expected}")
    return out


def _no_ext(code: int, data: bytes) -> Any:
    raise PayloadError(f"msgpack extension type {code} is not allowed in payloads")


def _check_plain(obj: Any, depth: int = 0) -> None:
    """Only maps, lists, strings, bytes, numbers, booleans and nil; msgpack decodes its timestamp extension
    (-1) without asking ext_hook, so this is where such objects are refused."""
    if depth > 32:
        raise PayloadError("payload metadata is nested too deeply")
    if isinstance(obj, dict):
        for key, value in obj.items():
            _check_plain(key, depth + 1)
            _check_plain(value, depth + 1)
    elif isinstance(obj, list):
        for item in obj:
            _check_plain(item, depth + 1)
    elif obj is not None and not isinstance(obj, str | bytes | int | float | bool):
        raise PayloadError(f"payload holds a {type(obj).__name__}; only plain msgpack types are allowed")


class _EntryBudget:
    """Counts the entries of every map and list as msgpack completes it, and stops the decode once they pass
    MAX_ENTRIES. msgpack refuses a single container over MAX_CONTAINER_LEN from its header, before building it;
    this bounds their sum, so what is built before a refusal stays small."""

    def __init__(self) -> None:
        self.left = MAX_ENTRIES

    def _spend(self, entries: int) -> None:
        self.left -= entries
        if self.left < 0:
            raise PayloadError(f"payload holds more than {MAX_ENTRIES} map and list entries; an rlfleet chunk keeps "
                               "its data in raw bytes")

    def map(self, value: dict[Any, Any]) -> dict[Any, Any]:
        self._spend(len(value))
        return value

    def list(self, value: list[Any]) -> list[Any]:
        self._spend(len(value))
        return value


def decode_chunk(raw: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Decode and validate; raises PayloadError on anything unexpected (truncation, bad dtype, bad shape, more
    maps and lists than a chunk has)."""
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"payload of {len(raw)} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte limit")
    budget = _EntryBudget()
    try:
        doc = msgpack.unpackb(raw, raw=False, strict_map_key=True, ext_hook=_no_ext, object_hook=budget.map,
                              list_hook=budget.list, max_array_len=MAX_CONTAINER_LEN,
                              max_map_len=MAX_CONTAINER_LEN)
    except PayloadError:
        raise
    except Exception as exc:  # msgpack raises several unrelated types for corrupt input
        raise PayloadError(f"not a valid msgpack document: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise PayloadError(f"not an {FORMAT} v{VERSION} payload")
    _check_plain(doc)
    meta, body = doc.get("meta"), doc.get("arrays")
    if not isinstance(meta, dict) or not isinstance(body, dict):
        raise PayloadError("payload lacks 'meta' and 'arrays' maps")
    arrays = {}
    total = 0  # decompressed bytes of all arrays so far: bounded like the file itself
    for name, spec in body.items():
        if not isinstance(spec, dict):
            raise PayloadError(f"array {name!r} is not a map")
        dtype, shape, data = spec.get("dtype"), spec.get("shape"), spec.get("data")
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise PayloadError(f"array {name!r} has dtype {dtype!r}; allowed: {sorted(DTYPES)}")
        if not isinstance(shape, list) or len(shape) > 32 or not all(type(d) is int and d >= 0 for d in shape):
            raise PayloadError(f"array {name!r} has an invalid shape {shape!r}")
        if not isinstance(data, bytes):
            raise PayloadError(f"array {name!r} data is not raw bytes")
        expected = math.prod(shape) * np.dtype(dtype).itemsize  # Python ints: no wrap-around
        total += expected
        if total > MAX_PAYLOAD_BYTES:
            raise PayloadError(f"payload arrays hold more than the {MAX_PAYLOAD_BYTES}-byte limit once decompressed "
                               f"(at array {name!r})")
        compression = spec.get("compression", "none")
        if compression == "zstd":
            data = _decompressed(name, data, expected)
        elif compression != "none":
            raise PayloadError(f"array {name!r} has compression {compression!r}; allowed: none, zstd")
        if expected != len(data):
            raise PayloadError(f"array {name!r}: shape {shape} x {dtype} needs {expected} bytes, got {len(data)}")
        arrays[name] = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
    return arrays, meta
