"""shared.payloads.codec: lossless round trip of every allowed dtype, and PayloadError (only) for anything else."""

from __future__ import annotations

import io
import struct
import tracemalloc

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlfleet.shared.payloads.codec import FORMAT, VERSION, PayloadError, decode_chunk, encode_chunk

ALLOWED = ["float32", "float64", "int64", "int32", "uint8", "bool"]


def _doc(arrays: object, *, fmt: object = FORMAT, version: object = VERSION, meta: object = None) -> bytes:
    return msgpack.packb(
        {"format": fmt, "version": version, "meta": {} if meta is None else meta, "arrays": arrays},
        use_bin_type=True,
    )


def _spec(dtype: object = "float32", shape: object = (2,), data: object = b"\0" * 8) -> bytes:
    return _doc({"a": {"dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape,
                       "data": data}})


def _decodes_or_payload_error(raw: bytes) -> None:
    """The codec's contract: a result, or PayloadError; never any other exception type."""
    try:
        arrays, meta = decode_chunk(raw)
    except PayloadError:
        return
    assert isinstance(arrays, dict) and isinstance(meta, dict)
    for arr in arrays.values():
        assert arr.dtype.name in ALLOWED


# ----- round trip ---------------------------------------------------------------------------------------

_arrays = st.sampled_from(ALLOWED).flatmap(
    lambda dt: hnp.arrays(
        dtype=np.dtype(dt),
        shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5),
        elements=({"allow_nan": True, "allow_infinity": True} if dt.startswith("float") else None),
    )
)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    arrays=st.dictionaries(st.text(min_size=1, max_size=12), _arrays, max_size=4),
    meta=st.dictionaries(
        st.text(max_size=8),
        st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), st.booleans(), st.none()),
        max_size=4,
    ),
)
def test_round_trip_preserves_dtype_shape_bytes_and_meta(arrays: dict[str, np.ndarray], meta: dict) -> None:
    decoded, decoded_meta = decode_chunk(encode_chunk(arrays, meta))
    assert decoded_meta == meta
    assert set(decoded) == set(arrays)
    for name, arr in arrays.items():
        out = decoded[name]
        assert out.dtype == arr.dtype
        assert out.shape == arr.shape
        assert out.tobytes() == np.ascontiguousarray(arr).tobytes()  # bitwise, so NaN payloads count too


def test_round_trip_from_plain_lists() -> None:
    arrays: dict[str, np.ndarray] = {
        "obs": np.array([[0.5, -1.25], [3.0, 4.0]], dtype=np.float32),
        "q": np.array([1e300, -2.5], dtype=np.float64),
        "act": np.array([0, 1, 1], dtype=np.int64),
        "idx": np.array([-7, 2**31 - 1], dtype=np.int32),
        "pix": np.array([[0, 255]], dtype=np.uint8),
        "done": np.array([True, False, True]),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    decoded, meta = decode_chunk(encode_chunk(arrays, {"task_id": "collector-0", "policy_version": 3}))
    assert meta == {"task_id": "collector-0", "policy_version": 3}
    for name, arr in arrays.items():
        assert decoded[name].dtype == arr.dtype, name
        assert decoded[name].shape == arr.shape, name
        np.testing.assert_array_equal(decoded[name], arr)
    assert decoded["obs"].tolist() == [[0.5, -1.25], [3.0, 4.0]]


def test_non_contiguous_input_round_trips_in_logical_order() -> None:
    base = np.arange(12, dtype=np.int64).reshape(3, 4)
    view = base[:, ::2].T  # neither C- nor F-contiguous
    decoded, _ = decode_chunk(encode_chunk({"v": view}))
    np.testing.assert_array_equal(decoded["v"], view)


def test_no_meta_decodes_as_empty_dict() -> None:
    assert decode_chunk(encode_chunk({}))[1] == {}


def test_zero_dim_array_round_trips_with_its_shape() -> None:
    decoded, _ = decode_chunk(encode_chunk({"s": np.array(3.5, dtype=np.float64)}))
    assert decoded["s"].shape == ()
    assert float(decoded["s"]) == 3.5


def test_zero_dim_array_decodes_when_encoded_by_hand() -> None:
    decoded, _ = decode_chunk(_spec(dtype="float64", shape=[], data=np.float64(2.5).tobytes()))
    assert decoded["a"].shape == () and float(decoded["a"]) == 2.5


def test_big_endian_input_round_trips_by_value() -> None:
    arr = np.array([1.0, 2.0, -3.5], dtype=">f4")
    decoded, _ = decode_chunk(encode_chunk({"x": arr}))
    assert decoded["x"].tolist() == [1.0, 2.0, -3.5]


# ----- encoder refuses what the decoder would refuse -------------------------------------------------------


@pytest.mark.parametrize(
    "arr",
    [
        np.array([object(), 1], dtype=object),
        np.array([1 + 2j], dtype=np.complex128),
        np.array([1], dtype=np.int16),
        np.array([1.0], dtype=np.float16),
        np.array(["ab"]),
        np.array([1], dtype=np.uint64),
    ],
    ids=["object", "complex128", "int16", "float16", "str", "uint64"],
)
def test_encode_rejects_disallowed_dtypes(arr: np.ndarray) -> None:
    with pytest.raises(PayloadError, match="dtype"):
        encode_chunk({"x": arr})


# ----- decoder rejections -----------------------------------------------------------------------------------

VALID = encode_chunk(
    {"obs": np.arange(24, dtype=np.float32).reshape(6, 4), "done": np.array([True, False] * 3)},
    {"chunk_id": "c1"},
)


def test_valid_fixture_decodes() -> None:
    arrays, meta = decode_chunk(VALID)
    assert arrays["obs"].shape == (6, 4) and meta == {"chunk_id": "c1"}


@pytest.mark.parametrize("cut", [0, 1, 2, 10, len(VALID) // 2, len(VALID) - 1])
def test_truncated_payload_rejected(cut: int) -> None:
    with pytest.raises(PayloadError):
        decode_chunk(VALID[:cut])


def test_trailing_bytes_rejected() -> None:
    with pytest.raises(PayloadError):
        decode_chunk(VALID + b"\x00")


@pytest.mark.parametrize("raw", [b"\xc1", b"\xff" * 64, b"not msgpack at all", bytes(range(256))])
def test_garbage_bytes_rejected(raw: bytes) -> None:
    with pytest.raises(PayloadError):
        decode_chunk(raw)


@pytest.mark.parametrize(
    ("fmt", "version"),
    [("rlfleet.chunks", 1), ("", 1), (None, 1), (FORMAT, 2), (FORMAT, 0), (FORMAT, "1"), (FORMAT, None)],
)
def test_wrong_format_or_version_rejected(fmt: object, version: object) -> None:
    with pytest.raises(PayloadError, match="rlfleet.chunk v1"):
        decode_chunk(_doc({}, fmt=fmt, version=version))


def test_missing_format_and_version_rejected() -> None:
    with pytest.raises(PayloadError):
        decode_chunk(msgpack.packb({"meta": {}, "arrays": {}}))


@pytest.mark.parametrize("top", [[1, 2], "rlfleet.chunk", 1, None, b"bytes", [FORMAT, VERSION, {}, {}]])
def test_non_map_top_level_rejected(top: object) -> None:
    with pytest.raises(PayloadError):
        decode_chunk(msgpack.packb(top, use_bin_type=True))


@pytest.mark.parametrize(
    ("meta", "arrays"), [(None, {}), ([], {}), ({}, None), ({}, []), ({}, "x")], ids=str
)
def test_meta_and_arrays_must_be_maps(meta: object, arrays: object) -> None:
    raw = msgpack.packb({"format": FORMAT, "version": VERSION, "meta": meta, "arrays": arrays})
    with pytest.raises(PayloadError, match="maps"):
        decode_chunk(raw)


@pytest.mark.parametrize("dtype", ["object", "complex128", "complex64", "O", "float16", "int16", "<f4", "",
                                   None, 4, b"float32"])
def test_disallowed_dtype_rejected(dtype: object) -> None:
    with pytest.raises(PayloadError, match="dtype"):
        decode_chunk(_spec(dtype=dtype))


@pytest.mark.parametrize(
    ("dtype", "shape", "nbytes"),
    [
        ("float32", [2], 7),
        ("float32", [2], 9),
        ("float64", [3, 2], 47),
        ("int32", [0], 4),
        ("uint8", [], 0),  # a 0-d array holds one element
        ("bool", [4], 0),
        ("int64", [2, 0], 8),
    ],
)
def test_shape_byte_count_mismatch_rejected(dtype: str, shape: list[int], nbytes: int) -> None:
    with pytest.raises(PayloadError, match="bytes"):
        decode_chunk(_spec(dtype=dtype, shape=shape, data=b"\x01" * nbytes))


@pytest.mark.parametrize("shape", [[-1], [2, -1], "2", 2, None, [1.0, 2], [[2]], ["2"]], ids=str)
def test_invalid_shape_rejected(shape: object) -> None:
    with pytest.raises(PayloadError, match="shape"):
        decode_chunk(_spec(shape=shape))


@pytest.mark.parametrize("data", ["\0" * 8, None, [0] * 8, 0], ids=["str", "none", "list", "int"])
def test_data_must_be_raw_bytes(data: object) -> None:
    with pytest.raises(PayloadError, match="raw bytes"):
        decode_chunk(_spec(data=data))


@pytest.mark.parametrize("spec", [[1, 2], "float32", None, 3])
def test_array_spec_must_be_a_map(spec: object) -> None:
    with pytest.raises(PayloadError, match="not a map"):
        decode_chunk(_doc({"a": spec}))


@pytest.mark.parametrize(
    "where", ["meta", "array_data", "top_level_value", "inside_list"]
)
def test_msgpack_extension_types_rejected(where: str) -> None:
    ext = msgpack.ExtType(5, b"\x80\x04payload")
    if where == "meta":
        raw = _doc({}, meta={"x": ext})
    elif where == "array_data":
        raw = _spec(data=ext)
    elif where == "top_level_value":
        raw = msgpack.packb(ext)
    else:
        raw = _doc({}, meta={"l": [1, ext]})
    with pytest.raises(PayloadError, match="extension type 5"):
        decode_chunk(raw)


def test_timestamp_extension_rejected() -> None:
    # msgpack's built-in timestamp extension (type -1) is an ext type like any other and must be refused.
    raw = _doc({}, meta={"t": msgpack.Timestamp(0, 0)})
    with pytest.raises(PayloadError):
        decode_chunk(raw)


def test_non_string_map_keys_rejected() -> None:
    raw = msgpack.packb({"format": FORMAT, "version": VERSION, "meta": {1: "x"}, "arrays": {}})
    with pytest.raises(PayloadError):
        decode_chunk(raw)


def test_oversized_payload_rejected_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rlfleet.shared.payloads.codec.MAX_PAYLOAD_BYTES", 16)
    with pytest.raises(PayloadError, match="limit"):
        decode_chunk(VALID)


# ----- bounded decoding: a payload of small objects is refused before it is built ---------------------------

NIL_BYTES = 20 * 1024 * 1024


def _column_holding(value: bytes) -> bytes:
    """A chunk document whose column `a` is the raw msgpack `value`, not the map of a column (so the schema
    check refuses it once decoded). Built by hand: packing the hostile structure from Python objects would itself
    take the memory the test is about."""
    head = msgpack.packb({"format": FORMAT, "version": VERSION, "meta": {}}, use_bin_type=True)
    return bytes([head[0] + 1]) + head[1:] + msgpack.packb("arrays") + b"\x81" + msgpack.packb("a") + value


def _peak_while_refusing(raw: bytes) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(PayloadError):
            decode_chunk(raw)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_one_long_list_of_nils_is_refused_without_building_it() -> None:
    # 20 MB of nils in one array: 160 MB of list slots if decoded before the schema check.
    raw = _column_holding(b"\xdd" + struct.pack(">I", NIL_BYTES) + b"\xc0" * NIL_BYTES)
    assert _peak_while_refusing(raw) < 1024 * 1024


def test_many_short_lists_of_nils_are_refused_without_building_them() -> None:
    # Each list within the per-container bound, 20 MB of nils in all.
    inner = b"\xdc" + struct.pack(">H", 1000) + b"\xc0" * 1000
    count = NIL_BYTES // len(inner)
    raw = _column_holding(b"\xdd" + struct.pack(">I", count) + inner * count)
    assert _peak_while_refusing(raw) < 1024 * 1024


def test_a_large_image_column_still_decodes() -> None:
    frames = np.random.default_rng(0).integers(0, 256, (256, 4, 84, 84), dtype=np.uint8)  # 7 MB of pixels
    arrays, _ = decode_chunk(encode_chunk({"obs": frames, "rewards": np.zeros(256, np.float32)}))
    assert np.array_equal(arrays["obs"], frames)


def test_payload_error_is_a_value_error() -> None:
    # Callers that only know ValueError (e.g. pydantic validators) still catch it.
    assert issubclass(PayloadError, ValueError)


# Bugs found: each input below is well-formed msgpack that makes decode_chunk raise something other than
# PayloadError. The structured fuzz test further down excludes exactly these shapes of input.


@pytest.mark.parametrize("dtype", [["float32"], {"x": 1}], ids=["list", "map"])
def test_unhashable_dtype_raises_payload_error(dtype: object) -> None:
    with pytest.raises(PayloadError):
        decode_chunk(_spec(dtype=dtype))


def test_bool_shape_raises_payload_error() -> None:
    with pytest.raises(PayloadError):
        decode_chunk(_spec(dtype="uint8", shape=[True], data=b"\0"))


def test_overflowing_shape_raises_payload_error() -> None:
    with pytest.raises(PayloadError):
        decode_chunk(_spec(dtype="uint8", shape=[2**32, 2**32], data=b""))


def test_huge_shape_without_wraparound_rejected() -> None:
    for shape in ([2**64 - 1], [2**63], [2**40, 2**10]):
        with pytest.raises(PayloadError):
            decode_chunk(_spec(dtype="uint8", shape=shape, data=b""))


# ----- fuzzing: PayloadError or success, never anything else ------------------------------------------------


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.binary(max_size=256))
def test_random_bytes_only_payload_error(raw: bytes) -> None:
    _decodes_or_payload_error(raw)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, len(VALID)),
)
def test_mutated_valid_payload_only_payload_error(flips: list[tuple[int, int]], cut: int) -> None:
    raw = bytearray(VALID)
    for pos, value in flips:
        raw[pos] = value
    _decodes_or_payload_error(bytes(raw[:cut]))
    _decodes_or_payload_error(bytes(raw))


_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=True),
    st.text(max_size=10), st.binary(max_size=16),
)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(
    dtype=st.one_of(st.sampled_from([*ALLOWED, "object", "complex64", "float16"]), _scalar),
    # dims stay small (no int64 overflow) and are never bools: both are known bugs, tested above
    shape=st.one_of(st.lists(st.integers(-2, 2**16), max_size=3), _scalar),
    data=st.one_of(st.binary(max_size=64), _scalar),
    meta=st.one_of(st.dictionaries(st.text(max_size=4), _scalar, max_size=3), _scalar),
)
def test_structured_fuzz_only_payload_error(dtype: object, shape: object, data: object, meta: object) -> None:
    raw = msgpack.packb(
        {"format": FORMAT, "version": VERSION, "meta": meta, "arrays": {"a": {"dtype": dtype, "shape": shape,
                                                                              "data": data}}},
        use_bin_type=True,
    )
    _decodes_or_payload_error(raw)


# ----- zstd-compressed arrays ----------------------------------------------------------------------------------

def test_zstd_round_trips_and_compresses_only_what_it_shrinks() -> None:
    frames = np.zeros((64, 84, 84), np.uint8)
    frames[:, 40:44, 10:12] = 255  # Pong-like: a mostly flat frame
    noise = np.random.default_rng(0).integers(0, 256, 8192, dtype=np.uint8)  # incompressible: kept raw
    arrays = {"frame": frames, "noise": noise, "rewards": np.arange(8, dtype=np.float32)}
    raw = encode_chunk(arrays, compression="zstd")
    doc = msgpack.unpackb(raw)
    assert doc["arrays"]["frame"]["compression"] == "zstd" and len(raw) < frames.nbytes / 50
    assert "compression" not in doc["arrays"]["noise"] and "compression" not in doc["arrays"]["rewards"]
    decoded, _ = decode_chunk(raw)
    for name, value in arrays.items():
        np.testing.assert_array_equal(decoded[name], value)


def _zstd_spec(shape: list[int], data: bytes, **spec: object) -> bytes:
    return _doc({"a": {"dtype": "uint8", "shape": shape, "data": data, "compression": "zstd", **spec}})


def test_a_zip_bomb_is_refused_before_it_is_decompressed() -> None:
    """1 GB of zeros in a ~40 KB frame, declared as a 16-byte array: zstandard would allocate what the frame
    declares, so the declared size is checked first."""
    import zstandard

    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=1).stream_writer(out, size=1 << 30, closefd=False) as writer:
        zeros = b"\0" * (1 << 20)
        for _ in range(1024):
            writer.write(zeros)
    bomb = out.getvalue()
    tracemalloc.start()
    try:
        with pytest.raises(PayloadError, match="declares 1073741824 bytes .* need 16"):
            decode_chunk(_zstd_spec([16], bomb))
        assert tracemalloc.get_traced_memory()[1] < 16 * 1024 * 1024
    finally:
        tracemalloc.stop()


def test_a_frame_that_declares_no_size_is_refused() -> None:
    import zstandard

    data = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * 4096)
    with pytest.raises(PayloadError, match="declares -1 bytes"):
        decode_chunk(_zstd_spec([4096], data))


def test_arrays_that_decompress_beyond_the_limit_together_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rlfleet.shared.payloads.codec.MAX_PAYLOAD_BYTES", 100_000)
    raw = encode_chunk({"a": np.zeros(60_000, np.uint8), "b": np.zeros(60_000, np.uint8)}, compression="zstd")
    assert len(raw) < 1000
    with pytest.raises(PayloadError, match="more than the 100000-byte limit once decompressed"):
        decode_chunk(raw)


@pytest.mark.parametrize(("spec", "message"), [
    ({"data": b"not zstd at all", "compression": "zstd"}, "not a valid zstd frame|declares"),
    ({"compression": "lz4"}, "compression 'lz4'"),
])
def test_unknown_or_broken_compression_is_refused(spec: dict, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        decode_chunk(_doc({"a": {"dtype": "uint8", "shape": [4], "data": b"\0" * 4, **spec}}))
