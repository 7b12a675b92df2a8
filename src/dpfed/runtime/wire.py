"""Versioned binary wire format of the networked runtime.

A frame carries one protocol :class:`~dpfed.runtime.messages.Message` together with the
job it belongs to and a per-sender sequence number. The transport (gRPC) treats frames as
opaque bytes; everything about them is defined here.

Frame layout (integers little-endian)::

    offset   size  content
    0        4     MAGIC, b"DPFD"
    4        2     format version, uint16 (WIRE_VERSION = 1)
    6        4     header length H, uint32
    10       H     header: UTF-8 JSON, compact, sorted keys, padded with trailing spaces so
                   that the payload starts at a multiple of 8 bytes
    10 + H   P     payload: the arrays' raw bytes, each at the offset (relative to the
                   payload start) its header entry gives

The header is the JSON object::

    {"arrays": [{"dtype": "<f8", "name": "scores", "nbytes": 24, "offset": 0,
                 "shape": [3]}],
     "job": "job-7", "kind": "Scores", "recipient": "label", "round": 2,
     "scalars": {}, "sender": "party1", "seq": 41}

``kind`` is the message class's name in the registry (:func:`register_message`); every
dataclass field of the message other than ``sender``, ``recipient`` and ``round`` appears
exactly once, either in ``arrays`` (``np.ndarray`` fields) or in ``scalars`` (``bool``,
``int``, finite ``float``, ``str`` or ``None``; an optional array field that is ``None`` is
a ``null`` scalar).

Arrays travel as raw little-endian bytes with dtype ``"<f8"``, ``"<i8"`` or ``"|b1"``. The
encoder lays them out in field order, each non-empty array at the next 8-byte aligned
offset, with zero padding in between and nothing after the last one. A decoder accepts any
layout in which the arrays lie inside the payload, do not overlap and leave no bytes
uncovered other than zero alignment padding (fewer than 8 bytes, up to an offset that is a
multiple of 8).

Decoding validates everything and raises :class:`WireError` for any malformed frame; it
never copies array data: the message's arrays are read-only views of the frame buffer.
Float arrays and scalars must be finite on both sides: a party never sends NaN or inf.
"""

from __future__ import annotations

import json
import math
import struct
import threading
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.runtime.messages import Message

__all__ = [
    "BATCH_MAGIC",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MAGIC",
    "MAX_NAME_LENGTH",
    "MAX_NDIM",
    "PREFIX_BYTES",
    "WIRE_VERSION",
    "Envelope",
    "WireError",
    "decode",
    "encode",
    "encode_batch",
    "peek_header",
    "register_message",
    "registered_kinds",
    "split_batch",
]

WIRE_VERSION = 1
"""Version of the frame format this module writes and reads."""

MAGIC = b"DPFD"
"""First four bytes of every frame."""

DEFAULT_MAX_MESSAGE_BYTES = 64 * 2**20
"""Largest frame accepted by default (64 MiB), header and payload included."""

MAX_NAME_LENGTH = 128
"""Longest job, party or kind name, in characters."""

MAX_NDIM = 32
"""Most array dimensions a frame may declare."""

_PREFIX = struct.Struct("<4sHI")
PREFIX_BYTES = _PREFIX.size
"""Bytes before the header: magic, version, header length."""

_ALIGN = 8
_INDEX_LIMIT = 2**63  # round and seq must fit a signed 64-bit integer
_BASE_FIELDS = frozenset({"sender", "recipient", "round"})
_HEADER_KEYS = frozenset(
    {"job", "kind", "sender", "recipient", "round", "seq", "scalars", "arrays"}
)
_ARRAY_KEYS = frozenset({"name", "dtype", "shape", "offset", "nbytes"})
_F8 = np.dtype("<f8")
_I8 = np.dtype("<i8")
_B1 = np.dtype("|b1")
_DTYPES = {dt.str: dt for dt in (_F8, _I8, _B1)}
_NONE = type(None)
_JSON_SCALARS = (bool, int, float, str, _NONE)
_INT64_MAX = np.iinfo(np.int64).max

_M = TypeVar("_M", bound=Message)


class WireError(DpfedInputError):
    """A frame, or a message to put in one, breaks the wire format."""


@dataclass(frozen=True)
class Envelope:
    """A decoded frame.

    Attributes
    ----------
    job : str
        Job the frame belongs to.
    seq : int
        Sender's sequence number of the frame.
    message : Message
        The message, of the registered class named by the frame's kind. Its arrays are
        read-only views of the frame buffer.
    nbytes : int
        Size of the frame in bytes.
    """

    job: str
    seq: int
    message: Message
    nbytes: int


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class _Field:
    name: str
    is_array: bool
    optional: bool  # an array field that may be None
    types: frozenset[type] | None  # scalar types the field allows; None: any JSON scalar


@dataclass(frozen=True)
class _Kind:
    cls: type[Message]
    fields: tuple[_Field, ...]
    by_name: Mapping[str, _Field]


_REGISTRY: dict[str, _Kind] = {}
_REGISTRY_LOCK = threading.Lock()


def register_message(cls: type[_M]) -> type[_M]:
    """Make a message class encodable and decodable; usable as a class decorator.

    The kind written on the wire is ``cls.__name__``. Registering the same class again is a
    no-op; registering a different class under a name already taken is an error.

    Parameters
    ----------
    cls : type
        A frozen dataclass subclassing :class:`~dpfed.runtime.messages.Message`. Its
        fields other than ``sender``, ``recipient`` and ``round`` are annotated either as
        ``np.ndarray`` (optionally ``| None``) or as scalars (``bool``, ``int``, ``float``,
        ``str``, ``None`` or unions of them; other annotations allow any of these).

    Returns
    -------
    type
        ``cls`` itself.

    Raises
    ------
    WireError
        If ``cls`` is not such a class, or its name is taken by another class.
    """
    if not isinstance(cls, type) or not issubclass(cls, Message):
        raise WireError(f"a wire message must be a subclass of Message. Found {_show(cls)}.")
    name = cls.__name__
    with _REGISTRY_LOCK:
        known = _REGISTRY.get(name)
        if known is not None:
            if known.cls is cls:
                return cls
            raise WireError(
                f"message kind {name!r} is already registered for "
                f"{known.cls.__module__}.{known.cls.__qualname__}. "
                f"Found another class {cls.__module__}.{cls.__qualname__}."
            )
        _REGISTRY[name] = _describe(cls)
    return cls


def registered_kinds() -> tuple[str, ...]:
    """Names of the registered message kinds, sorted."""
    with _REGISTRY_LOCK:
        return tuple(sorted(_REGISTRY))


def describe_kind(cls: type[Message]) -> str:
    """A registered message class as text: its kind and each field with its wire type, e.g.
    ``Scores(sender:str,recipient:str,round:int,scores:array)``.

    Raises
    ------
    WireError
        If ``cls`` is not registered.
    """
    with _REGISTRY_LOCK:
        kind = _REGISTRY.get(cls.__name__)
    if kind is None or kind.cls is not cls:
        raise WireError(f"message class {cls.__qualname__} is not registered.")

    def field_type(f: _Field) -> str:
        if f.is_array:
            return "array?" if f.optional else "array"
        if f.types is None:
            return "json"
        return "|".join(sorted(t.__name__ for t in f.types))

    return f"{cls.__name__}(" + ",".join(f"{f.name}:{field_type(f)}" for f in kind.fields) + ")"


def _describe(cls: type[Message]) -> _Kind:
    name = cls.__name__
    if not name or len(name) > MAX_NAME_LENGTH:
        raise WireError(
            f"message class name must have 1 to {MAX_NAME_LENGTH} characters. Found {_show(name)}."
        )
    params = cls.__dict__.get("__dataclass_params__")
    if "__dataclass_fields__" not in cls.__dict__ or params is None or not params.frozen:
        raise WireError(
            f"a wire message must be a frozen dataclass (@dataclass(frozen=True)). "
            f"Found {name} without one."
        )
    try:
        hints = typing.get_type_hints(cls)
    except Exception as exc:
        raise WireError(f"cannot resolve the field annotations of {name}: {exc}.") from exc
    described = []
    for f in fields(cls):
        if f.name in _BASE_FIELDS:
            continue
        if not f.init:
            raise WireError(
                f"every field of a wire message must be an __init__ argument. "
                f"Found {name}.{f.name} with init=False."
            )
        described.append(_describe_field(name, f.name, hints.get(f.name, Any)))
    spec = tuple(described)
    return _Kind(cls=cls, fields=spec, by_name=types.MappingProxyType({f.name: f for f in spec}))


def _describe_field(kind: str, name: str, hint: Any) -> _Field:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint) if origin in (typing.Union, types.UnionType) else (hint,)
    optional = _NONE in args
    rest = [a for a in args if a is not _NONE]
    arrays = [a for a in rest if a is np.ndarray or typing.get_origin(a) is np.ndarray]
    if arrays:
        if len(arrays) != len(rest):
            raise WireError(
                f"field {kind}.{name} must be annotated either as an array or as a scalar. "
                f"Found {hint!r}."
            )
        return _Field(name, True, optional, None)
    allowed: set[type] = {_NONE} if optional else set()
    for a in rest:
        scalar = _scalar_type(a)
        if scalar is None:
            return _Field(name, False, False, None)
        allowed.add(scalar)
    return _Field(name, False, False, frozenset(allowed))


def _scalar_type(hint: Any) -> type | None:
    if not isinstance(hint, type):
        return None
    if issubclass(hint, bool | np.bool_):
        return bool
    if issubclass(hint, int | np.integer):
        return int
    if issubclass(hint, float | np.floating):
        return float
    if issubclass(hint, str):
        return str
    return None


# --------------------------------------------------------------------------- encode


def encode(
    message: Message, *, job: str, seq: int, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> bytes:
    """Serialise a message into one frame.

    Parameters
    ----------
    message : Message
        Instance of a registered message class (see :func:`register_message`).
    job : str
        Job the message belongs to; 1 to 128 characters.
    seq : int
        Sender's sequence number, an integer in ``[0, 2**63)``.
    max_bytes : int, optional
        Largest frame allowed.

    Returns
    -------
    bytes
        The frame.

    Raises
    ------
    WireError
        If the message's class is not registered, a name or number is out of range, an
        array has a dtype other than float, integer or bool (or an unsigned value above
        ``2**63 - 1``), a float array or scalar is not finite, a field holds the wrong kind
        of value, or the frame would exceed ``max_bytes``.
    """
    limit = _check_max_bytes(max_bytes)
    kind = _registered_kind(message)
    name = kind.cls.__name__
    header = _base_header(message, job, seq)
    scalars, entries, parts, offset = _lay_out_fields(kind, message)
    header["scalars"] = scalars
    header["arrays"] = entries
    text = _header_text(header, name)
    total = PREFIX_BYTES + len(text) + offset
    if total > limit:
        raise WireError(
            f"the {name} frame would be {total} bytes, over max_bytes={limit}. "
            f"Found arrays of {offset} bytes."
        )
    return b"".join([_PREFIX.pack(MAGIC, WIRE_VERSION, len(text)), text, *parts])


def _registered_kind(message: Message) -> _Kind:
    """The registry entry of ``message``'s class, which must be a registered Message."""
    if not isinstance(message, Message):
        raise WireError(f"message must be a Message. Found {type(message).__name__}.")
    cls = type(message)
    kind = _REGISTRY.get(cls.__name__)
    if kind is None or kind.cls is not cls:
        raise WireError(
            f"message class {cls.__module__}.{cls.__qualname__} is not registered for the "
            f"wire; decorate it with register_message. Registered kinds: "
            f"{list(registered_kinds())}."
        )
    return kind


def _base_header(message: Message, job: str, seq: int) -> dict[str, Any]:
    """The header's job, kind, sender, recipient, round and sequence number, checked."""
    _check_name("job", job)
    _check_name("sender", message.sender)
    _check_name("recipient", message.recipient)
    return {
        "job": job,
        "kind": type(message).__name__,
        "sender": message.sender,
        "recipient": message.recipient,
        "round": _check_index("round", message.round),
        "seq": _check_index("seq", seq),
    }


def _lay_out_fields(
    kind: _Kind, message: Message
) -> tuple[dict[str, Any], list[dict[str, Any]], list[Any], int]:
    """The message's scalars, its arrays' header entries, the payload's pieces (arrays and
    alignment padding) and the payload's size."""
    name = kind.cls.__name__
    scalars: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    parts: list[Any] = []
    offset = 0
    for field in kind.fields:
        value = getattr(message, field.name)
        where = f"field {name}.{field.name}"
        if field.is_array:
            if value is None and field.optional:
                scalars[field.name] = None
                continue
            if not isinstance(value, np.ndarray):
                raise WireError(f"{where} must be a numpy array. Found {_show(value)}.")
            array = _array_for_wire(where, value)
            if array.nbytes:
                pad = -offset % _ALIGN
                if pad:
                    parts.append(bytes(pad))
                    offset += pad
                parts.append(array)
            entries.append(
                {
                    "name": field.name,
                    "dtype": array.dtype.str,
                    "shape": list(array.shape),
                    "offset": offset,
                    "nbytes": array.nbytes,
                }
            )
            offset += array.nbytes
        else:
            if isinstance(value, np.ndarray):
                raise WireError(f"{where} must be a scalar. Found an array of shape {value.shape}.")
            scalars[field.name] = _check_scalar_type(where, field, _scalar_for_wire(where, value))
    return scalars, entries, parts, offset


def _header_text(header: dict[str, Any], name: str) -> bytes:
    """The header as compact sorted JSON, padded so that the payload starts aligned."""
    try:
        text = json.dumps(
            header, separators=(",", ":"), sort_keys=True, allow_nan=False, ensure_ascii=False
        ).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WireError(f"{name} holds a string that is not valid Unicode: {exc}.") from exc
    text += b" " * (-(PREFIX_BYTES + len(text)) % _ALIGN)
    if len(text) > 0xFFFFFFFF:
        raise WireError(f"the {name} header must fit in 4 GiB. Found {len(text)} bytes.")
    return text


def _array_for_wire(where: str, value: np.ndarray) -> np.ndarray:
    dtype = value.dtype
    target: np.dtype[Any]
    if dtype.kind == "b":
        target = _B1
    elif dtype.kind == "f":
        target = _F8
    elif dtype.kind in "iu":
        target = _I8
    else:
        raise WireError(
            f"{where} must have a float, integer or bool dtype. Found dtype {dtype.str!r}."
        )
    if value.ndim > MAX_NDIM:
        raise WireError(f"{where} must have at most {MAX_NDIM} dimensions. Found {value.ndim}.")
    if dtype.kind == "u" and dtype.itemsize >= 8 and value.size and value.max() > _INT64_MAX:
        raise WireError(
            f"{where} must hold values up to 2**63 - 1 to travel as int64. Found {value.max()}."
        )
    array = np.asarray(value, dtype=target, order="C")  # keeps 0-d; no copy if already so
    if target is _F8:
        if dtype.itemsize > 8 and not np.array_equal(array, value, equal_nan=True):
            raise WireError(
                f"{where} cannot be converted to float64 without loss. Found dtype {dtype.str!r}."
            )
        _check_finite(where, array)
    return array


def _scalar_for_wire(where: str, value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        if not math.isfinite(number):
            raise WireError(f"{where} must be a finite number. Found {_show(value)}.")
        if isinstance(value, np.floating) and value.dtype.itemsize > 8 and number != value:
            raise WireError(
                f"{where} cannot be converted to float64 without loss. Found {_show(value)}."
            )
        return number
    raise WireError(
        f"{where} must be a bool, int, float, str or None. "
        f"Found {type(value).__name__} {_show(value)}."
    )


# --------------------------------------------------------------------------- decode


def peek_header(
    data: bytes | bytearray | memoryview,
    *,
    job: str | None = None,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> dict[str, Any]:
    """Validate a frame's envelope and header and return the header, without building arrays.

    Meant for routing: checks the size, magic, version, header structure, names, numbers
    and the array layout (dtypes, shapes, offsets), but not that the kind is registered,
    that the fields match the kind, nor the array values.

    Parameters
    ----------
    data : bytes, bytearray or memoryview
        The frame.
    job : str, optional
        If given, the frame must belong to this job.
    max_bytes : int, optional
        Largest frame accepted; checked before anything is parsed.

    Returns
    -------
    dict
        The header: ``job``, ``kind``, ``sender``, ``recipient``, ``round``, ``seq``,
        ``scalars`` (name -> value) and ``arrays`` (list of dicts with ``name``, ``dtype``,
        ``shape``, ``offset``, ``nbytes``).

    Raises
    ------
    WireError
        If the frame is malformed, too large, or of another job.
    """
    header, _, _ = _read_header(data, job, max_bytes)
    return header


def decode(
    data: bytes | bytearray | memoryview,
    *,
    job: str | None = None,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Envelope:
    """Parse and validate one frame.

    Parameters
    ----------
    data : bytes, bytearray or memoryview
        The frame. Must stay unchanged while the message's arrays are in use: they are
        read-only views of it, not copies (they keep it alive, and a ``bytearray`` cannot
        be resized meanwhile).
    job : str, optional
        If given, the frame must belong to this job.
    max_bytes : int, optional
        Largest frame accepted; checked before anything is parsed.

    Returns
    -------
    Envelope
        Job, sequence number, message and frame size.

    Raises
    ------
    WireError
        If anything about the frame is wrong: size, magic, version, header (JSON, keys,
        types, names, negative numbers), unknown kind, other job, array dtype, shape,
        layout, non-finite or non-boolean values, fields not matching the kind's.
    """
    header, view, start = _read_header(data, job, max_bytes)
    kind = _REGISTRY.get(header["kind"])
    if kind is None:
        raise WireError(
            f"unknown message kind {_show(header['kind'])}. "
            f"Registered kinds: {list(registered_kinds())}."
        )
    name = kind.cls.__name__
    scalars: dict[str, Any] = header["scalars"]
    entries: list[dict[str, Any]] = header["arrays"]
    array_names = {e["name"] for e in entries}
    both = sorted(array_names & scalars.keys())
    if both:
        raise WireError(f"{name} frame lists field(s) {both} both as arrays and as scalars.")
    present = array_names | scalars.keys()
    missing = [f.name for f in kind.fields if f.name not in present]
    unexpected = sorted(present - kind.by_name.keys())
    if missing or unexpected:
        raise WireError(
            f"{name} frame fields must be {[f.name for f in kind.fields]}. "
            f"Found missing {missing}, unexpected {unexpected}."
        )
    values: dict[str, Any] = {}
    for entry in entries:
        field = kind.by_name[entry["name"]]
        where = f"field {name}.{field.name}"
        if not field.is_array:
            raise WireError(
                f"{where} must be a scalar. Found an array of shape {tuple(entry['shape'])}."
            )
        values[field.name] = _array_from_wire(where, view, start, entry)
    for key, value in scalars.items():
        field = kind.by_name[key]
        where = f"field {name}.{key}"
        if field.is_array:
            if value is None and field.optional:
                values[key] = None
                continue
            raise WireError(f"{where} must be an array. Found the scalar {_show(value)}.")
        values[key] = _check_scalar_type(where, field, value)
    try:
        message = kind.cls(
            sender=header["sender"],
            recipient=header["recipient"],
            round=header["round"],
            **values,
        )
    except Exception as exc:
        raise WireError(f"cannot build a {name} from the frame: {exc}") from exc
    return Envelope(job=header["job"], seq=header["seq"], message=message, nbytes=view.nbytes)


def _read_header(
    data: Any, job: str | None, max_bytes: int
) -> tuple[dict[str, Any], memoryview, int]:
    """Check envelope, header and array layout; return header, byte view, payload start."""
    limit = _check_max_bytes(max_bytes)
    if job is not None:
        _check_name("job", job)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireError(
            f"a frame must be bytes, bytearray or memoryview. Found {type(data).__name__}."
        )
    try:
        view = memoryview(data).cast("B").toreadonly()
    except TypeError as exc:
        raise WireError(f"a frame must be a contiguous byte buffer: {exc}.") from exc
    size = view.nbytes
    if size > limit:
        raise WireError(f"frame is {size} bytes, over max_bytes={limit}.")
    if size < PREFIX_BYTES:
        raise WireError(
            f"frame is too short: a frame has at least {PREFIX_BYTES} bytes. Found {size} bytes."
        )
    magic, version, length = _PREFIX.unpack_from(view)
    if magic != MAGIC:
        raise WireError(f"frame must start with the magic {MAGIC!r}. Found {magic!r}.")
    if version != WIRE_VERSION:
        raise WireError(
            f"unsupported wire version {version}; this build reads version {WIRE_VERSION}."
        )
    start = PREFIX_BYTES + length
    if start > size:
        raise WireError(
            f"frame is truncated: header length {length} needs {start} bytes. Found {size} bytes."
        )
    try:
        header = json.loads(
            bytes(view[PREFIX_BYTES:start]).decode("utf-8"),
            object_pairs_hook=_json_object,
            parse_constant=_json_constant,
            parse_float=_json_float,
        )
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:  # includes UnicodeDecodeError
        raise WireError(f"frame header must be UTF-8 JSON. Found an error: {exc}.") from exc
    _check_header(header)
    if job is not None and header["job"] != job:
        raise WireError(f"frame must belong to job {job!r}. Found job {header['job']!r}.")
    _check_layout(header["arrays"], view, start)
    return header, view, start


def _check_header(header: Any) -> None:
    if not isinstance(header, dict):
        raise WireError(f"frame header must be a JSON object. Found {type(header).__name__}.")
    if header.keys() != _HEADER_KEYS:
        raise WireError(
            f"frame header keys must be {sorted(_HEADER_KEYS)}. Found missing "
            f"{sorted(_HEADER_KEYS - header.keys())}, unexpected "
            f"{sorted(header.keys() - _HEADER_KEYS)}."
        )
    for key in ("job", "kind", "sender", "recipient"):
        _check_name(key, header[key])
    for key in ("round", "seq"):
        _check_index(key, header[key], exact=True)
    scalars = header["scalars"]
    if not isinstance(scalars, dict):
        raise WireError(f"header scalars must be a JSON object. Found {_show(scalars)}.")
    for key, value in scalars.items():
        _check_name("scalar name", key)
        if not isinstance(value, _JSON_SCALARS):
            raise WireError(
                f"scalar {key!r} must be a bool, number, string or null. Found {_show(value)}."
            )
    entries = header["arrays"]
    if not isinstance(entries, list):
        raise WireError(f"header arrays must be a JSON list. Found {_show(entries)}.")
    seen: set[str] = set()
    for entry in entries:
        if not isinstance(entry, dict) or entry.keys() != _ARRAY_KEYS:
            raise WireError(
                f"each header array entry must be an object with keys {sorted(_ARRAY_KEYS)}. "
                f"Found {_show(entry)}."
            )
        _check_name("array name", entry["name"])
        if entry["name"] in seen:
            raise WireError(f"array names must be unique. Found {entry['name']!r} twice.")
        seen.add(entry["name"])
        where = f"array {entry['name']!r}"
        dtype = _DTYPES.get(entry["dtype"]) if isinstance(entry["dtype"], str) else None
        if dtype is None:
            raise WireError(
                f"{where} dtype must be one of {sorted(_DTYPES)}. Found {_show(entry['dtype'])}."
            )
        shape = entry["shape"]
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_NDIM
            or not all(_is_int(n) and n >= 0 for n in shape)
        ):
            raise WireError(
                f"{where} shape must be a list of at most {MAX_NDIM} integers >= 0. "
                f"Found {_show(shape)}."
            )
        for key in ("offset", "nbytes"):
            if not _is_int(entry[key]) or entry[key] < 0:
                raise WireError(
                    f"{where} {key} must be an integer >= 0. Found {_show(entry[key])}."
                )
        expected = math.prod(shape) * dtype.itemsize
        if entry["nbytes"] != expected:
            raise WireError(
                f"{where} of shape {tuple(shape)} and dtype {dtype.str} must have nbytes "
                f"{expected}. Found {entry['nbytes']}."
            )


def _check_layout(entries: list[dict[str, Any]], view: memoryview, start: int) -> None:
    size = view.nbytes - start
    end = 0
    previous: str | None = None
    for entry in sorted(entries, key=lambda e: (e["offset"], e["nbytes"])):
        offset, nbytes, name = entry["offset"], entry["nbytes"], entry["name"]
        if offset + nbytes > size:
            raise WireError(
                f"array {name!r} must lie inside the {size}-byte payload. "
                f"Found bytes [{offset}, {offset + nbytes})."
            )
        if offset < end:
            raise WireError(
                f"arrays must not overlap. Found {name!r} at offset {offset} inside "
                f"{previous!r}, which ends at {end}."
            )
        if offset > end:
            if offset % _ALIGN or offset - end >= _ALIGN:
                raise WireError(
                    f"payload bytes [{end}, {offset}) are not covered by any array "
                    f"(only padding to an {_ALIGN}-byte boundary may be). Found the gap "
                    f"before array {name!r}."
                )
            if any(view[start + end : start + offset]):
                raise WireError(
                    f"alignment padding must be zero bytes. Found "
                    f"{bytes(view[start + end : start + offset])!r} before array {name!r}."
                )
        end = offset + nbytes
        previous = name
    if end != size:
        raise WireError(
            f"payload must end with its last array. Found {size - end} trailing bytes "
            f"not covered by any array."
        )


def _array_from_wire(where: str, view: memoryview, start: int, entry: dict[str, Any]) -> np.ndarray:
    dtype = _DTYPES[entry["dtype"]]
    shape = tuple(entry["shape"])
    count = math.prod(shape)
    if count == 0:
        array = np.empty(shape, dtype=dtype)
        array.flags.writeable = False
        return array
    array = np.frombuffer(view, dtype=dtype, count=count, offset=start + entry["offset"])
    array = array.reshape(shape)
    if dtype is _F8:
        _check_finite(where, array)
    elif dtype is _B1 and np.any(array.view(np.uint8) > 1):
        bad = int(np.max(array.view(np.uint8)))
        raise WireError(f"{where} must hold bytes 0 or 1 (bool). Found the byte {bad}.")
    return array


# --------------------------------------------------------------------------- checks


def _check_finite(where: str, array: np.ndarray) -> None:
    if array.size and not np.isfinite(array).all():
        flat = int(np.flatnonzero(~np.isfinite(array.reshape(-1)))[0])
        index = tuple(int(i) for i in np.unravel_index(flat, array.shape))
        raise WireError(
            f"{where} must hold finite values only. Found {array.reshape(-1)[flat]} "
            f"at index {index}."
        )


def _check_scalar_type(where: str, field: _Field, value: Any) -> Any:
    allowed = field.types
    if allowed is None or type(value) in allowed:
        return value
    if type(value) is int and float in allowed:
        try:
            return float(value)
        except OverflowError:
            pass
    expected = " or ".join(sorted("None" if t is _NONE else t.__name__ for t in allowed))
    raise WireError(f"{where} must be {expected}. Found {_show(value)}.")


def _check_name(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH:
        raise WireError(
            f"{what} must be a non-empty string of at most {MAX_NAME_LENGTH} characters. "
            f"Found {_show(value)}."
        )
    return value


def _check_index(what: str, value: Any, *, exact: bool = False) -> int:
    if exact:
        ok = _is_int(value)
    else:
        ok = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
    if not ok or not 0 <= value < _INDEX_LIMIT:
        raise WireError(f"{what} must be an integer in [0, 2**63). Found {_show(value)}.")
    return int(value)


def _check_max_bytes(max_bytes: Any) -> int:
    integer = isinstance(max_bytes, int | np.integer) and not isinstance(max_bytes, bool)
    if not integer or max_bytes < PREFIX_BYTES:
        raise WireError(
            f"max_bytes must be an integer >= {PREFIX_BYTES}. Found {_show(max_bytes)}."
        )
    return int(max_bytes)


def _is_int(value: Any) -> bool:
    return type(value) is int


def _show(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        dup = next(k for k in keys if keys.count(k) > 1)
        raise WireError(f"frame header keys must be unique. Found {dup!r} twice.")
    return obj


def _json_constant(token: str) -> float:
    raise WireError(f"frame header numbers must be finite. Found {token}.")


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise WireError(f"frame header numbers must be finite. Found {_show(text)}.")
    return value


BATCH_MAGIC = b"DPFB"
"""First four bytes of a batch: several frames to one recipient in one call."""

_BATCH_COUNT = struct.Struct("<I")
_BATCH_LENGTH = struct.Struct("<Q")


def encode_batch(frames: typing.Sequence[bytes]) -> bytes:
    """Several frames, in order, as one payload::

    BATCH_MAGIC  count (uint32)  [length (uint64)  frame] * count
    """
    parts = [BATCH_MAGIC, _BATCH_COUNT.pack(len(frames))]
    for frame in frames:
        parts += [_BATCH_LENGTH.pack(len(frame)), frame]
    return b"".join(parts)


def split_batch(
    data: bytes | memoryview, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> list[memoryview]:
    """The frames of a batch (a single frame is returned as a batch of one).

    Raises
    ------
    WireError
        If the batch is larger than ``max_bytes`` or its lengths do not add up.
    """
    view = memoryview(data)
    if len(view) > max_bytes:
        raise WireError(f"payload of {len(view)} bytes exceeds the limit of {max_bytes} bytes.")
    if bytes(view[:4]) != BATCH_MAGIC:
        return [view]
    if len(view) < 4 + _BATCH_COUNT.size:
        raise WireError(f"batch of {len(view)} bytes is too short for its count.")
    (count,) = _BATCH_COUNT.unpack_from(view, 4)
    frames, pos = [], 4 + _BATCH_COUNT.size
    for k in range(count):
        if pos + _BATCH_LENGTH.size > len(view):
            raise WireError(f"batch ends before the length of frame {k + 1} of {count}.")
        (length,) = _BATCH_LENGTH.unpack_from(view, pos)
        pos += _BATCH_LENGTH.size
        if pos + length > len(view):
            raise WireError(
                f"frame {k + 1} of {count} claims {length} bytes; only {len(view) - pos} remain."
            )
        frames.append(view[pos : pos + length])
        pos += length
    if pos != len(view) or count == 0:
        raise WireError(f"batch of {count} frames leaves {len(view) - pos} bytes unaccounted for.")
    return frames
