"""The binary wire format: round trips, and every malformed frame refused with WireError."""

from __future__ import annotations

import json
import math
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dpfed import DpfedInputError
from dpfed.protocols.vertical.messages import Broadcast, Scores
from dpfed.runtime.messages import Message
from dpfed.runtime.wire import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAGIC,
    WIRE_VERSION,
    Envelope,
    WireError,
    decode,
    encode,
    peek_header,
    register_message,
    registered_kinds,
)

register_message(Scores)
register_message(Broadcast)


@register_message
@dataclass(frozen=True)
class WireTestPair(Message):
    left: np.ndarray
    right: np.ndarray
    step: float
    done: bool
    note: str


@register_message
@dataclass(frozen=True)
class WireTestOptional(Message):
    extra: np.ndarray | None = None
    count: int = 0
    label: str | None = None
    free: Any = None


PREFIX = struct.Struct("<4sHI")


def pair(left=None, right=None, *, step=0.5, done=False, note="hi", rnd=2) -> WireTestPair:
    left = np.array([1.5, -2.0, 3.25]) if left is None else left
    right = np.array([[1, 2], [3, 4]]) if right is None else right
    return WireTestPair("alice", "bob", rnd, left, right, step, done, note)


def split(frame: bytes) -> tuple[dict, bytes]:
    """Header (as a dict) and payload of a frame."""
    _, _, length = PREFIX.unpack_from(frame)
    return json.loads(frame[10 : 10 + length]), frame[10 + length :]


def build(
    header: dict | bytes, payload: bytes = b"", *, magic: bytes = MAGIC, version: int = WIRE_VERSION
) -> bytes:
    """A frame by hand; dict headers are dumped with NaN/Infinity allowed."""
    text = (
        header
        if isinstance(header, bytes)
        else json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    )
    return PREFIX.pack(magic, version, len(text)) + text + payload


def outcome(data: bytes) -> Envelope | WireError:
    """Decode, turning WireError into a value; any other exception propagates."""
    try:
        return decode(data)
    except WireError as exc:
        return exc


def canonical(dtype: np.dtype) -> np.dtype:
    return np.dtype({"f": "<f8", "i": "<i8", "u": "<i8", "b": "|b1"}[dtype.kind])


def assert_same(decoded: Message, original: Message) -> None:
    assert type(decoded) is type(original)
    for name in original.__dataclass_fields__:
        got, want = getattr(decoded, name), getattr(original, name)
        if isinstance(want, np.ndarray):
            want = np.asarray(want, dtype=canonical(want.dtype))
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()
        elif isinstance(want, float):
            assert type(got) is float and struct.pack("<d", got) == struct.pack("<d", want)
        else:
            assert type(got) is type(want) and got == want


SAMPLE = encode(pair(), job="job", seq=3)
SAMPLE_HEADER, SAMPLE_PAYLOAD = split(SAMPLE)


def sample_header() -> dict:
    return json.loads(json.dumps(SAMPLE_HEADER))


# ------------------------------------------------------------------ round trips

finite = st.floats(allow_nan=False, allow_infinity=False)
names = st.text(min_size=1, max_size=128)
WIRE_DTYPES = [
    np.dtype(d)
    for d in ("<f8", ">f8", "<f4", "<f2", "<i8", ">i4", "<i2", "u1", "<u4", ">u8", "|b1")
]


@st.composite
def any_array(draw) -> np.ndarray:
    dtype = draw(st.sampled_from(WIRE_DTYPES))
    elements = (
        hnp.from_dtype(dtype, allow_nan=False, allow_infinity=False) if dtype.kind == "f" else None
    )
    if dtype.kind == "u" and dtype.itemsize == 8:
        elements = st.integers(0, 2**63 - 1)
    shape = hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5)
    array = draw(hnp.arrays(dtype, shape, elements=elements))
    if array.ndim == 2 and draw(st.booleans()):
        array = array.T  # not C-contiguous
    return array


@settings(max_examples=50, deadline=None)
@given(
    left=any_array(),
    right=any_array(),
    step=finite,
    done=st.booleans(),
    note=st.text(max_size=20),
    sender=names,
    recipient=names,
    rnd=st.integers(0, 2**63 - 1),
    seq=st.integers(0, 2**63 - 1),
    job=names,
)
def test_round_trip_is_identity(left, right, step, done, note, sender, recipient, rnd, seq, job):
    message = WireTestPair(sender, recipient, rnd, left, right, step, done, note)
    frame = encode(message, job=job, seq=seq)
    envelope = decode(frame, job=job)
    assert (envelope.job, envelope.seq, envelope.nbytes) == (job, seq, len(frame))
    assert_same(envelope.message, message)
    assert encode(envelope.message, job=job, seq=seq) == frame  # canonical
    header = peek_header(frame)
    assert header["kind"] == "WireTestPair" and header["seq"] == seq


@settings(max_examples=40, deadline=None)
@given(
    extra=st.none() | any_array(),
    count=st.integers(-(2**70), 2**70),
    label=st.none() | st.text(max_size=10),
    free=st.none() | st.booleans() | st.integers() | finite | st.text(max_size=10),
)
def test_optional_fields_round_trip(extra, count, label, free):
    message = WireTestOptional("a", "b", 0, extra, count, label, free)
    frame = encode(message, job="j", seq=0)
    assert_same(decode(frame).message, message)
    header = peek_header(frame)
    if extra is None:
        assert header["scalars"]["extra"] is None and header["arrays"] == []


def test_real_vertical_messages_round_trip():
    rng = np.random.default_rng(0)
    scores = Scores("party1", "label", 4, rng.normal(size=7))
    cast = Broadcast("label", "party1", 4, rng.normal(size=7), rng.normal(size=7), 0.25)
    done = Broadcast("label", "party2", 9, np.zeros(7), np.ones(7), 1.0, finished=True)
    for seq, message in enumerate((scores, cast, done)):
        envelope = decode(encode(message, job="vertical", seq=seq), job="vertical")
        assert envelope.seq == seq
        assert_same(envelope.message, message)
    assert {"Scores", "Broadcast", "WireTestPair"} <= set(registered_kinds())


def test_float64_is_bit_exact_including_negative_zero_and_subnormals():
    tiny = np.finfo(np.float64).smallest_subnormal
    special = np.array(
        [
            -0.0,
            0.0,
            tiny,
            -tiny,
            2.2250738585072014e-308 / 3,
            np.finfo(np.float64).max,
            np.finfo(np.float64).min,
            1 / 3,
            -1e-310,
        ]
    )
    message = pair(left=special, step=-0.0)
    got = decode(encode(message, job="j", seq=0)).message
    assert got.left.tobytes() == special.tobytes()
    assert math.copysign(1.0, got.step) == -1.0
    got = decode(encode(pair(step=5e-324), job="j", seq=0)).message
    assert got.step == 5e-324


def test_int_in_a_float_field_arrives_as_float():
    got = decode(encode(pair(step=2), job="j", seq=0)).message
    assert type(got.step) is float and got.step == 2.0


def test_decode_is_zero_copy_and_read_only():
    frame = encode(Scores("p", "l", 0, np.arange(10.0)), job="j", seq=0)
    scores = decode(frame).message.scores
    assert np.shares_memory(scores, np.frombuffer(frame, dtype=np.uint8))
    assert not scores.flags.writeable and scores.flags.aligned
    buffer = bytearray(frame)  # a writable buffer still gives read-only arrays
    for data in (buffer, memoryview(buffer)):
        scores = decode(data).message.scores
        assert np.shares_memory(scores, np.frombuffer(buffer, dtype=np.uint8))
        with pytest.raises(ValueError):
            scores.flags.writeable = True
        with pytest.raises(ValueError):
            scores[0] = 1.0


def test_layout_is_aligned_and_padded_with_zeros():
    frame = encode(pair(left=np.array([True, False, True])), job="j", seq=0)
    header, payload = split(frame)
    assert (len(frame) - len(payload)) % 8 == 0
    offsets = {a["name"]: a["offset"] for a in header["arrays"]}
    assert offsets == {"left": 0, "right": 8}
    assert payload[3:8] == bytes(5)
    assert header["scalars"] == {"done": False, "note": "hi", "step": 0.5}
    bad = bytearray(frame)
    bad[len(frame) - len(payload) + 5] = 1
    with pytest.raises(WireError, match="padding must be zero"):
        decode(bytes(bad))


def test_decoder_accepts_unaligned_layouts_of_other_encoders():
    frame = encode(pair(left=np.array([True, False, True])), job="j", seq=0)
    header, payload = split(frame)
    header["arrays"][1]["offset"] = 3  # no padding after the 3-byte bool array
    text = json.dumps(header, separators=(",", ":"))  # unsorted, unpadded header
    got = decode(build(text.encode(), payload[:3] + payload[8:])).message
    assert got.left.tolist() == [True, False, True]
    assert got.right.tolist() == [[1, 2], [3, 4]]


def test_peek_header_does_not_look_at_array_values():
    payload = struct.pack("<d", math.nan) + SAMPLE_PAYLOAD[8:]
    assert peek_header(build(SAMPLE_HEADER, payload)) == SAMPLE_HEADER
    with pytest.raises(WireError, match="finite"):
        decode(build(SAMPLE_HEADER, payload))


def test_large_message_is_fast():
    scores = Scores("p", "l", 0, np.random.default_rng(0).normal(size=32_561))
    best = math.inf
    for _ in range(30):
        start = time.perf_counter()
        decode(encode(scores, job="j", seq=0))
        best = min(best, time.perf_counter() - start)
    assert best < 1e-3


# ------------------------------------------------------------------ registry


def test_register_is_idempotent_and_refuses_a_different_class_with_the_same_name():
    assert register_message(Scores) is Scores
    assert registered_kinds().count("Scores") == 1

    @dataclass(frozen=True)
    class Impostor(Message):
        scores: np.ndarray

    Impostor.__name__ = "Scores"
    with pytest.raises(WireError, match=r"'Scores' is already registered for dpfed\.protocols"):
        register_message(Impostor)


def test_register_refuses_what_is_not_a_frozen_message_dataclass():
    with pytest.raises(WireError, match="subclass of Message"):
        register_message(int)

    class Undecorated(Message):
        pass

    with pytest.raises(WireError, match="frozen dataclass"):
        register_message(Undecorated)

    @dataclass(frozen=True)
    class Ambiguous(Message):
        value: np.ndarray | int

    with pytest.raises(WireError, match="either as an array or as a scalar"):
        register_message(Ambiguous)

    @dataclass(frozen=True)
    class Derived(Message):
        value: int = field(init=False, default=0)

    with pytest.raises(WireError, match="init=False"):
        register_message(Derived)
    assert not {"Undecorated", "Ambiguous", "Derived"} & set(registered_kinds())


# ------------------------------------------------------------------ encode refusals


def test_encode_refuses_unregistered_classes_and_non_messages():
    @dataclass(frozen=True)
    class WireTestPair(Message):  # same name as a registered class, but another class
        left: np.ndarray

    with pytest.raises(WireError, match="not registered"):
        encode(WireTestPair("a", "b", 0, np.zeros(1)), job="j", seq=0)
    with pytest.raises(WireError, match="must be a Message"):
        encode({"scores": np.zeros(1)}, job="j", seq=0)


@pytest.mark.parametrize(
    "bad, where",
    [
        (np.array([[1.0, np.nan]]), "Found nan at index (0, 1)"),
        (np.array([1.0, 2.0, -np.inf]), "Found -inf at index (2,)"),
        (np.array([np.inf], dtype=np.float32), "Found inf at index (0,)"),
    ],
)
def test_encode_refuses_non_finite_arrays(bad, where):
    with pytest.raises(WireError, match="must hold finite values only") as info:
        encode(pair(left=bad), job="j", seq=0)
    assert where in str(info.value) and "WireTestPair.left" in str(info.value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_encode_refuses_non_finite_scalars(value):
    with pytest.raises(WireError, match=r"WireTestPair\.step must be a finite number"):
        encode(pair(step=value), job="j", seq=0)


@pytest.mark.parametrize(
    "bad",
    [
        np.array([object()]),
        np.array([1 + 2j]),
        np.array(["abc"]),
        np.array([b"x"]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
    ],
)
def test_encode_refuses_other_dtypes(bad):
    with pytest.raises(WireError, match="must have a float, integer or bool dtype") as info:
        encode(pair(right=bad), job="j", seq=0)
    assert repr(bad.dtype.str) in str(info.value)


def test_encode_refuses_lossy_conversions():
    with pytest.raises(WireError, match=r"2\*\*63 - 1"):
        encode(pair(right=np.array([2**63], dtype=np.uint64)), job="j", seq=0)
    with pytest.raises(WireError, match="at most 32 dimensions"):
        encode(pair(right=np.zeros((1,) * 33)), job="j", seq=0)
    if np.finfo(np.longdouble).nmant > 52:
        precise = np.array([1 + np.finfo(np.longdouble).eps], dtype=np.longdouble)
        with pytest.raises(WireError, match="without loss"):
            encode(pair(left=precise), job="j", seq=0)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"note": [1, 2]}, "WireTestPair.note must be a bool, int, float, str or None"),
        ({"done": 1}, "WireTestPair.done must be bool. Found 1"),
        ({"note": None}, "WireTestPair.note must be str. Found None"),
        ({"note": "\ud800"}, "WireTestPair holds a string that is not valid Unicode"),
        ({"step": np.zeros(2)}, "WireTestPair.step must be a scalar. Found an array"),
        ({"left": [1.0, 2.0]}, "WireTestPair.left must be a numpy array. Found [1.0, 2.0]"),
        ({"left": None}, "WireTestPair.left must be a numpy array. Found None"),
        ({"round": -1}, "round must be an integer in [0, 2**63). Found -1"),
        ({"round": True}, "round must be an integer"),
        ({"sender": ""}, "sender must be a non-empty string"),
        ({"recipient": "r" * 129}, "recipient must be a non-empty string of at most 128"),
    ],
)
def test_encode_refuses_bad_fields(changes, match):
    values = {
        "sender": "alice",
        "recipient": "bob",
        "round": 0,
        "left": np.zeros(2),
        "right": np.zeros(2),
        "step": 0.5,
        "done": False,
        "note": "x",
        **changes,
    }
    with pytest.raises(WireError) as info:
        encode(WireTestPair(**values), job="j", seq=0)
    assert match in str(info.value)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"job": "", "seq": 0}, "job must be a non-empty string"),
        ({"job": "j" * 129, "seq": 0}, "job must be a non-empty string"),
        ({"job": 5, "seq": 0}, "job must be"),
        ({"job": "j", "seq": -1}, "seq must be an integer in [0, 2**63). Found -1"),
        ({"job": "j", "seq": 2**63}, "seq must be an integer"),
        ({"job": "j", "seq": 1.0}, "seq must be an integer"),
        ({"job": "j", "seq": 0, "max_bytes": 0}, "max_bytes must be an integer"),
    ],
)
def test_encode_refuses_bad_envelope_arguments(kwargs, match):
    with pytest.raises(WireError) as info:
        encode(pair(), **kwargs)
    assert match in str(info.value)


def test_encode_refuses_oversized_messages():
    big = Scores("p", "l", 0, np.zeros(1000))
    with pytest.raises(WireError, match="over max_bytes=4000"):
        encode(big, job="j", seq=0, max_bytes=4000)
    assert len(encode(big, job="j", seq=0, max_bytes=8200)) <= 8200
    assert DEFAULT_MAX_MESSAGE_BYTES == 64 * 2**20


def test_wire_error_is_an_input_error():
    assert issubclass(WireError, DpfedInputError) and issubclass(WireError, ValueError)


# ------------------------------------------------------------------ decode refusals


def test_decode_refuses_bad_envelopes():
    with pytest.raises(WireError, match=r"too short.*Found 2 bytes"):
        decode(b"DP")
    with pytest.raises(WireError, match=r"magic b'DPFD'. Found b'DPFX'"):
        decode(b"DPFX" + SAMPLE[4:])
    with pytest.raises(WireError, match="frame is truncated: header length 999"):
        decode(SAMPLE[:6] + struct.pack("<I", 999) + SAMPLE[10:])
    with pytest.raises(WireError, match=r"must be bytes, bytearray or memoryview\. Found str"):
        decode("DPFD")


@pytest.mark.parametrize("version", [0, 2, 65535])
def test_decode_refuses_other_versions(version):
    frame = SAMPLE[:4] + struct.pack("<H", version) + SAMPLE[6:]
    with pytest.raises(WireError) as info:
        decode(frame)
    message = str(info.value)
    assert f"unsupported wire version {version}" in message
    assert f"reads version {WIRE_VERSION}" in message
    with pytest.raises(WireError, match="unsupported wire version"):
        peek_header(frame)


def test_oversized_frames_are_refused_before_parsing():
    with pytest.raises(WireError, match=f"frame is {len(SAMPLE)} bytes, over max_bytes=100"):
        decode(SAMPLE, max_bytes=100)
    garbage = b"\xff" * 200  # neither magic nor header is looked at
    with pytest.raises(WireError, match="frame is 200 bytes, over max_bytes=100"):
        decode(garbage, max_bytes=100)
    with pytest.raises(WireError, match="over max_bytes"):
        peek_header(garbage, max_bytes=100)
    assert decode(SAMPLE, max_bytes=len(SAMPLE)).nbytes == len(SAMPLE)


def test_job_mismatch_is_refused():
    assert decode(SAMPLE, job="job").job == "job"
    with pytest.raises(WireError, match=r"must belong to job 'other'\. Found job 'job'"):
        decode(SAMPLE, job="other")
    with pytest.raises(WireError, match="must belong to job 'other'"):
        peek_header(SAMPLE, job="other")


def test_unknown_kind_is_refused_but_can_be_peeked():
    header = sample_header()
    header["kind"] = "Nope"
    frame = build(header, SAMPLE_PAYLOAD)
    with pytest.raises(WireError, match=r"unknown message kind 'Nope'\. Registered kinds: \["):
        decode(frame)
    assert peek_header(frame)["kind"] == "Nope"  # routing needs no message classes


@pytest.mark.parametrize(
    "text, match",
    [
        (b"\xff\xfe{}", "must be UTF-8 JSON"),
        (b'{"job":', "must be UTF-8 JSON"),
        (b"[1, 2]", "must be a JSON object. Found list"),
        (b"[" * 100_000, "must be UTF-8 JSON"),
        (b'{"round":' + b"9" * 5000 + b"}", "must be UTF-8 JSON"),
    ],
)
def test_decode_refuses_headers_that_are_not_json_objects(text, match):
    with pytest.raises(WireError, match=match):
        decode(build(text))


def mutate(**changes):
    """A header mutation: set top-level keys (None deletes)."""

    def apply(header):
        for key, value in changes.items():
            if value is None:
                del header[key]
            else:
                header[key] = value

    return apply


def set_array(index, **changes):
    def apply(header):
        header["arrays"][index].update(changes)

    return apply


def set_scalar(**changes):
    def apply(header):
        header["scalars"].update(changes)

    return apply


@pytest.mark.parametrize(
    "change, match",
    [
        (mutate(seq=None), "Found missing ['seq'], unexpected []"),
        (mutate(extra=1), "Found missing [], unexpected ['extra']"),
        (mutate(round=-1), "round must be an integer in [0, 2**63). Found -1"),
        (mutate(seq=-5), "seq must be an integer in [0, 2**63). Found -5"),
        (mutate(round=2**63), "round must be an integer in [0, 2**63)"),
        (mutate(round="3"), "round must be an integer in [0, 2**63). Found '3'"),
        (mutate(round=True), "round must be an integer in [0, 2**63). Found True"),
        (mutate(seq=1.0), "seq must be an integer in [0, 2**63). Found 1.0"),
        (mutate(sender=""), "sender must be a non-empty string of at most 128 characters"),
        (mutate(job="j" * 129), "job must be a non-empty string"),
        (mutate(kind=7), "kind must be a non-empty string"),
        (mutate(recipient=["bob"]), "recipient must be a non-empty string"),
        (mutate(scalars=[]), "header scalars must be a JSON object. Found []"),
        (set_scalar(note=[1]), "scalar 'note' must be a bool, number, string or null"),
        (mutate(arrays={}), "header arrays must be a JSON list. Found {}"),
        (mutate(arrays=[1]), "each header array entry must be an object"),
        (set_array(0, extra=1), "each header array entry must be an object"),
        (set_array(1, name="left"), "array names must be unique. Found 'left' twice"),
        (set_array(0, dtype="<f4"), "dtype must be one of ['<f8', '<i8', '|b1']. Found '<f4'"),
        (set_array(0, dtype=">f8"), "Found '>f8'"),
        (set_array(0, dtype="|O"), "Found '|O'"),
        (set_array(0, dtype=8), "Found 8"),
        (set_array(0, shape=[-3]), "shape must be a list of at most 32 integers >= 0. Found [-3]"),
        (set_array(0, shape="3"), "shape must be a list"),
        (set_array(0, shape=[1] * 33), "shape must be a list of at most 32"),
        (set_array(0, shape=[4]), "must have nbytes 32. Found 24"),
        (set_array(0, nbytes=16), "must have nbytes 24. Found 16"),
        (set_array(0, offset=-8), "'left' offset must be an integer >= 0. Found -8"),
        (set_array(0, nbytes=1.5), "'left' nbytes must be an integer >= 0. Found 1.5"),
        (set_array(1, offset=16), "must not overlap. Found 'right' at offset 16 inside 'left'"),
        (set_array(1, offset=40), "'right' must lie inside the 56-byte payload"),
        (set_array(1, offset=2**70), "'right' must lie inside"),
        (set_array(1, shape=[2, 1], nbytes=16), "16 trailing bytes not covered by any array"),
        (mutate(kind="Scores"), "Scores frame fields must be ['scores', 'statistics']"),
        (set_scalar(bogus=1), "Found missing [], unexpected ['bogus']"),
        (set_scalar(left=1.0), "lists field(s) ['left'] both as arrays and as scalars"),
        (set_scalar(done=1), "field WireTestPair.done must be bool. Found 1"),
        (set_scalar(note=None), "field WireTestPair.note must be str. Found None"),
        (set_scalar(step="0.5"), "field WireTestPair.step must be float. Found '0.5'"),
        (set_scalar(step=math.nan), "frame header numbers must be finite. Found NaN"),
        (set_scalar(step=math.inf), "frame header numbers must be finite. Found Infinity"),
        (set_scalar(step=-math.inf), "frame header numbers must be finite. Found -Infinity"),
    ],
)
def test_decode_refuses_bad_headers(change, match):
    header = sample_header()
    change(header)
    with pytest.raises(WireError) as info:
        decode(build(header, SAMPLE_PAYLOAD))
    assert match in str(info.value)


def test_decode_refuses_missing_scalar_fields():
    header = sample_header()
    del header["scalars"]["note"]
    with pytest.raises(WireError, match=r"Found missing \['note'\], unexpected \[\]"):
        decode(build(header, SAMPLE_PAYLOAD))


def test_decode_refuses_a_scalar_where_an_array_belongs_and_vice_versa():
    header = sample_header()  # drop the 'left' array and send it as a scalar instead
    header["arrays"] = [dict(header["arrays"][1], offset=0)]
    header["scalars"]["left"] = 1.0
    with pytest.raises(WireError, match=r"WireTestPair.left must be an array. Found the scalar"):
        decode(build(header, SAMPLE_PAYLOAD[24:]))

    header = sample_header()  # send the 'step' scalar as a 0-d array
    del header["scalars"]["step"]
    header["arrays"].append(
        {"name": "step", "dtype": "<f8", "shape": [], "offset": 56, "nbytes": 8}
    )
    with pytest.raises(WireError, match=r"WireTestPair.step must be a scalar. Found an array"):
        decode(build(header, SAMPLE_PAYLOAD + struct.pack("<d", 0.5)))


def test_decode_refuses_uncovered_bytes_and_out_of_buffer_arrays():
    header = sample_header()
    header["arrays"][0]["offset"] = 8
    header["arrays"][1]["offset"] = 32
    with pytest.raises(WireError, match=r"payload bytes \[0, 8\) are not covered"):
        decode(build(header, bytes(8) + SAMPLE_PAYLOAD))
    with pytest.raises(WireError, match="8 trailing bytes not covered"):
        decode(build(sample_header(), SAMPLE_PAYLOAD + bytes(8)))
    with pytest.raises(WireError, match="'right' must lie inside the 55-byte payload"):
        decode(build(sample_header(), SAMPLE_PAYLOAD[:-1]))


def test_decode_refuses_raw_non_finite_and_duplicate_header_tokens():
    text = SAMPLE[10 : 10 + PREFIX.unpack_from(SAMPLE)[2]]
    for token in (b"1e999", b"-1E400"):
        bad = text.replace(b'"step":0.5', b'"step":' + token)
        with pytest.raises(WireError, match="frame header numbers must be finite"):
            decode(build(bad, SAMPLE_PAYLOAD))
    bad = text.replace(b'"seq":3', b'"seq":3,"seq":4')
    with pytest.raises(WireError, match=r"keys must be unique\. Found 'seq' twice"):
        decode(build(bad, SAMPLE_PAYLOAD))


@pytest.mark.parametrize(
    "value, shown",
    [
        (math.nan, "Found nan at index (1,)"),
        (math.inf, "Found inf at index (1,)"),
        (-math.inf, "Found -inf at index (1,)"),
    ],
)
def test_decode_refuses_non_finite_arrays(value, shown):
    payload = SAMPLE_PAYLOAD[:8] + struct.pack("<d", value) + SAMPLE_PAYLOAD[16:]
    with pytest.raises(WireError, match=r"WireTestPair\.left must hold finite values only") as info:
        decode(build(SAMPLE_HEADER, payload))
    assert shown in str(info.value)


def test_decode_refuses_bool_bytes_other_than_0_and_1():
    frame = encode(pair(left=np.array([True, False])), job="j", seq=0)
    header, payload = split(frame)
    with pytest.raises(WireError, match=r"must hold bytes 0 or 1 \(bool\)\. Found the byte 2"):
        decode(build(header, b"\x01\x02" + payload[2:]))


@register_message
@dataclass(frozen=True)
class WireTestChecked(Message):
    value: int

    def __post_init__(self):
        if self.value > 10:
            raise ValueError(f"value too large: {self.value}")


def test_decode_wraps_errors_raised_while_building_the_message():
    frame = encode(WireTestChecked("a", "b", 0, 5), job="j", seq=0)
    header, payload = split(frame)
    header["scalars"]["value"] = 11
    with pytest.raises(WireError, match=r"cannot build a WireTestChecked.*value too large"):
        decode(build(header, payload))


# ------------------------------------------------------------------ fuzzing


FUZZ = encode(WireTestOptional("a", "b", 1, np.array([True, False]), 5, "x", 2.5), job="j", seq=7)
FUZZ_HEADER_END = 10 + PREFIX.unpack_from(FUZZ)[2]


def test_every_truncation_is_refused():
    for cut in range(len(SAMPLE)):
        with pytest.raises(WireError):
            decode(SAMPLE[:cut])
    for cut in range(len(FUZZ)):
        with pytest.raises(WireError):
            decode(FUZZ[:cut])


def test_every_single_bit_flip_in_the_prefix_and_header_decodes_or_raises_wire_error():
    for frame, end in ((FUZZ, FUZZ_HEADER_END), (SAMPLE, 10 + PREFIX.unpack_from(SAMPLE)[2])):
        for position in range(end):
            for bit in range(8):
                bad = bytearray(frame)
                bad[position] ^= 1 << bit
                outcome(bytes(bad))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, FUZZ_HEADER_END - 1), st.integers(1, 255)), min_size=1, max_size=4
    ),
    st.integers(0, len(FUZZ)),
)
def test_random_damage_decodes_or_raises_wire_error(flips, cut):
    bad = bytearray(FUZZ)
    for position, mask in flips:
        bad[position] ^= mask
    assert isinstance(outcome(bytes(bad[:cut])), Envelope | WireError)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_wire_error(data):
    assert isinstance(outcome(MAGIC + struct.pack("<H", WIRE_VERSION) + data), WireError)
    assert isinstance(outcome(data), WireError)
