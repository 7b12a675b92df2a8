"""A protocol's parameters, defined once: dataclass fields with metadata.

A protocol's configuration is a frozen dataclass whose every field is declared with
:func:`param`: its default, a help text, whether it is public (it may be shared in a job file
that every party reads) and, for text, its choices. The type comes from the field's annotation.
From that one definition come

* the job file's ``[params]`` table and its validation (:func:`job_parameters`,
  :func:`config_from_table`),
* the command line's options (:func:`add_config_arguments`, :func:`config_kwargs`),
* and the estimators' parameters (:func:`parameter_names`),

so the four places a parameter used to be written down cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive

_KEY = "dpfed"


@dataclass(frozen=True)
class ParamInfo:
    """What :func:`param` attaches to a field.

    Attributes
    ----------
    help : str
        One line for ``--help`` and the docs.
    public : bool
        False for a value that must not be shared in a job file every party reads (a seed of
        everyone's noise); a job file may then hold it only in a declared simulation.
    choices : tuple of str or None
        The values a text parameter takes.
    metavar : tuple of str or None
        Names of a fixed-length tuple's values on the command line.
    interval : Interval or None
        The range of a number (:func:`check_params` enforces it).
    """

    help: str
    public: bool = True
    choices: tuple[str, ...] | None = None
    metavar: tuple[str, ...] | None = None
    interval: Interval | None = None


#: Which ends of an :class:`Interval` belong to it.
CLOSED = ("neither", "left", "right", "both")


@dataclass(frozen=True)
class Interval:
    """The range of a numeric parameter, in the manner of scikit-learn's parameter
    constraints: ``low`` and ``high`` (None: unbounded) and which ends are ``closed``.

    Attributes
    ----------
    low, high : float or None
    closed : {"neither", "left", "right", "both"}
    """

    low: float | None
    high: float | None
    closed: str = "neither"

    def __post_init__(self) -> None:
        if self.closed not in CLOSED:
            raise ValueError(f"closed must be one of {CLOSED}. Found {self.closed!r}.")

    def check(self, name: str, value: Any, kind: type) -> None:
        """Raise :class:`DpfedInputError` naming ``name`` if ``value`` (an ``int`` or a
        ``float`` parameter's) is not a finite number of this interval."""
        left = self.closed in ("left", "both")
        right = self.closed in ("right", "both")
        if kind is int and self.high is None and self.low is not None and left:
            check_int(name, value, minimum=int(self.low))
            return
        if kind is int:
            check_int(name, value, minimum=-(2**63))
        if (self.low, self.high) == (0, None) and kind is float:
            check_positive(name, value, allow_zero=left)
            return
        if (self.low, self.high, self.closed) == (0, 1, "neither"):
            check_open_unit(name, value)
            return
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise DpfedInputError(f"{name} must be a number. Found {value!r}.") from None
        inside = math.isfinite(v)
        if self.low is not None:
            inside = inside and (v >= self.low if left else v > self.low)
        if self.high is not None:
            inside = inside and (v <= self.high if right else v < self.high)
        if not inside:
            lo = "-inf" if self.low is None else f"{self.low:g}"
            hi = "inf" if self.high is None else f"{self.high:g}"
            shown = f"{'[' if left else '('}{lo}, {hi}{']' if right else ')'}"
            raise DpfedInputError(f"{name} must be a finite number in {shown}. Found {value!r}.")


@dataclass(frozen=True)
class Parameter:
    """One field of a configuration dataclass, resolved.

    Attributes
    ----------
    name : str
    kind : type
        ``bool``, ``int``, ``float``, ``str``, ``tuple`` (a fixed or variable-length tuple of
        numbers) or a nested configuration dataclass.
    optional : bool
        None is allowed (the default then means "decided from other values").
    default : Any
    info : ParamInfo
    length : int or None
        The number of values of a fixed-length tuple (``tuple[float, float]``: 2); None for
        any other kind and for a variable-length tuple (``tuple[float, ...]``).
    """

    name: str
    kind: type
    optional: bool
    default: Any
    info: ParamInfo
    length: int | None = None

    @property
    def toml_types(self) -> tuple[type, ...]:
        """The TOML value types a job file may give it."""
        if self.kind is bool:
            return (bool,)
        if self.kind is int:
            return (int,)
        if self.kind is float:
            return (int, float)
        if self.kind is str:
            return (str,)
        if self.kind is tuple:
            return (list,)
        return (dict,)  # a nested configuration: a TOML table

    def read(self, value: Any, where: str) -> Any:
        """A job file's ``value`` of this parameter, checked: its TOML type, finite numbers, a
        tuple's length; a tuple comes back as a list of floats, anything else as given.

        Raises
        ------
        DpfedInputError
            Naming ``where``, the value and what was expected. The value's range is the
            configuration's ``validated()``'s to check.
        """
        if self.kind is tuple:
            numbers = isinstance(value, list | tuple) and all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                for v in value
            )
            if self.length is not None and not (numbers and len(value) == self.length):
                names = ", ".join(m.lower() for m in self.info.metavar or ())
                raise DpfedInputError(
                    f"{where} must be [{names}], {self.length} finite numbers. Found {value!r}."
                )
            if not numbers:
                raise DpfedInputError(f"{where} must be a list of finite numbers. Found {value!r}.")
            return [float(v) for v in value]
        types = self.toml_types
        if isinstance(value, bool) and bool not in types:
            raise DpfedInputError(f"{where} must be a number. Found {value!r}.")
        if not isinstance(value, types):
            expected = " or ".join(t.__name__ for t in types)
            raise DpfedInputError(f"{where} must be {expected}. Found {value!r}.")
        if isinstance(value, float) and not math.isfinite(value):
            raise DpfedInputError(f"{where} must be finite. Found {value!r}.")
        return value


def param(
    default: Any = None,
    *,
    help: str,
    public: bool = True,
    choices: Iterable[str] | None = None,
    metavar: Iterable[str] | None = None,
    interval: tuple[float | None, float | None] | None = None,
    closed: str = "neither",
) -> Any:
    """A configuration field with its default and its :class:`ParamInfo`.

    ``interval=(low, high)`` with ``closed`` declares a number's range (None: unbounded), e.g.
    ``interval=(0, None)`` for a positive number and ``interval=(1, None), closed="left"`` for
    an integer of at least 1; ``choices`` the values a text takes. :func:`check_params` then
    checks them, so a configuration's ``validated()`` keeps only the rules between fields.
    """
    info = ParamInfo(
        help,
        public,
        None if choices is None else tuple(choices),
        None if metavar is None else tuple(metavar),
        None if interval is None else Interval(interval[0], interval[1], closed),
    )
    return dataclasses.field(default=default, metadata={_KEY: info})


def _kind(name: str, hint: Any) -> tuple[type, bool, int | None]:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint) if origin in (typing.Union, types.UnionType) else (hint,)
    optional = type(None) in args
    rest = [a for a in args if a is not type(None)]
    if len(rest) != 1:
        raise TypeError(f"parameter {name!r} must have one type (or it or None). Found {hint!r}.")
    kind = rest[0]
    if typing.get_origin(kind) is tuple:
        items = typing.get_args(kind)
        return tuple, optional, None if Ellipsis in items else len(items)
    if kind in (bool, int, float, str) or dataclasses.is_dataclass(kind):
        return kind, optional, None
    raise TypeError(f"parameter {name!r} has a type a job file cannot hold: {hint!r}.")


def parameters(config: type) -> list[Parameter]:
    """Every field of the configuration dataclass ``config``, in order.

    Raises
    ------
    TypeError
        If a field was not declared with :func:`param` or has a type without a job-file form.
    """
    hints = typing.get_type_hints(config)
    out = []
    for f in dataclasses.fields(config):
        info = f.metadata.get(_KEY)
        if info is None:
            raise TypeError(f"{config.__name__}.{f.name} must be declared with param().")
        kind, optional, length = _kind(f.name, hints[f.name])
        out.append(Parameter(f.name, kind, optional, f.default, info, length))
    return out


def check_params(config: Any) -> None:
    """Check every value of the configuration dataclass instance ``config`` against its own
    declaration: a text against its ``choices``, a number against its ``interval`` (None, the
    "decided from other values" default of an optional field, passes).

    Raises
    ------
    DpfedInputError
        For the first field, in declaration order, whose value is outside its declaration,
        naming the field, the value and what was expected.
    """
    for p in parameters(type(config)):
        value = getattr(config, p.name)
        if value is None:
            continue
        if p.info.choices is not None and value not in p.info.choices:
            raise DpfedInputError(f"{p.name} must be one of {p.info.choices}. Found {value!r}.")
        if p.info.interval is not None:
            p.info.interval.check(p.name, value, p.kind)


def parameter_names(config: type) -> list[str]:
    """The names of ``config``'s parameters (an estimator's constructor arguments)."""
    return [p.name for p in parameters(config)]


def job_parameters(config: type, *, exclude: Iterable[str] = ()) -> dict[str, Parameter]:
    """``[params]`` keys of a job file, each with the parameter that reads its value
    (:meth:`Parameter.read`)."""
    skip = set(exclude)
    return {p.name: p for p in parameters(config) if p.name not in skip}


def secret_parameters(config: type) -> list[str]:
    """Names of the parameters that must not be shared in a job file (``public=False``)."""
    return [p.name for p in parameters(config) if not p.info.public]


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DpfedInputError(f"{where} must be a finite number. Found {value!r}.")
    return value


def config_from_table(
    config: type, table: Mapping[str, Any], *, where: str = "[params]", exclude: Iterable[str] = ()
) -> Any:
    """The ``config`` dataclass from a job-file table (values read by :meth:`Parameter.read`);
    keys in ``exclude`` belong to something else and are left out.

    Lists become tuples of numbers and nested tables nested configurations; the dataclass
    (and its ``validated()``, called by the protocol) checks the values themselves.

    Raises
    ------
    DpfedInputError
        Naming the key, the value and what was expected.
    """
    skip = set(exclude)
    table = {k: v for k, v in table.items() if k not in skip}
    by_name = {p.name: p for p in parameters(config) if p.name not in skip}
    unknown = sorted(set(table) - set(by_name))
    if unknown:
        raise DpfedInputError(
            f"{where} has unknown keys {unknown}. Expected some of {sorted(by_name)}."
        )
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        p = by_name[key]
        if p.kind is tuple:
            value = tuple(p.read(value, f"{where}.{key}"))
        elif dataclasses.is_dataclass(p.kind):
            if not isinstance(value, Mapping):
                raise DpfedInputError(f"{where}.{key} must be a table. Found {value!r}.")
            value = _nested(p.kind, value, f"{where}.{key}")
        kwargs[key] = value
    return config(**kwargs)


def _nested(kind: type, table: Mapping[str, Any], where: str) -> Any:
    names = [f.name for f in dataclasses.fields(kind)]
    unknown = sorted(set(table) - set(names))
    if unknown:
        raise DpfedInputError(f"{where} has unknown keys {unknown}. Expected some of {names}.")
    return kind(**{k: _number(f"{where}.{k}", v) for k, v in table.items()})


# -- the command line -------------------------------------------------------------------------


def parse_float(text: str) -> float:
    """A command-line number (argparse reports a malformed one against its option)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def parse_int(text: str) -> int:
    """A command-line integer."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def parse_float_list(text: str) -> tuple[float, ...]:
    """``"0.5,1,1"`` as numbers."""
    return tuple(parse_float(v) for v in text.split(",") if v.strip())


_PARSERS: dict[type, Any] = {int: parse_int, float: parse_float, str: str}


def option_name(name: str) -> str:
    """The command-line option of parameter ``name`` (``noise_sigma`` -> ``--noise-sigma``)."""
    return "--" + name.replace("_", "-")


def _tuple_arity(config: type, name: str) -> int | None:
    """The length of a fixed-length tuple parameter, None for ``tuple[float, ...]``."""
    hint = typing.get_type_hints(config)[name]
    for arm in typing.get_args(hint) or (hint,):
        if typing.get_origin(arm) is tuple:
            args = typing.get_args(arm)
            return None if len(args) == 2 and args[1] is Ellipsis else len(args)
    return None  # pragma: no cover - _kind admits tuples only


def _shown(value: Any) -> str:
    return ",".join(f"{v:g}" for v in value) if isinstance(value, tuple) else f"{value}"


def add_config_arguments(
    parser: argparse.ArgumentParser,
    config: type,
    *,
    exclude: Iterable[str] = (),
    required: Iterable[str] = (),
    defaults: Mapping[str, Any] | None = None,
    notes: Mapping[str, str] | None = None,
) -> None:
    """Add one option per parameter of ``config``.

    ``lam`` becomes ``--lam`` (parsed as its type, with its choices and help); a bool
    ``--x``/``--no-x``; a fixed-length tuple that many values (``--tol ABS REL``), a
    variable-length one a comma-separated list (``--node-alphas 1,0.5``); a nested
    configuration one option per field (``bounds.row_norm`` -> ``--bounds-row-norm``). Every
    option defaults to None, i.e. to the configuration's default (shown in the help), unless
    ``defaults`` gives the command's own.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    config : type
        A configuration dataclass whose fields are declared with :func:`param`.
    exclude : iterable of str
        Parameters the command sets itself.
    required : iterable of str
        Parameters the command needs the user to give.
    defaults : mapping, optional
        The command's defaults, where they differ from the configuration's.
    notes : mapping of str to str, optional
        Text that replaces the shown default in a parameter's help (how the command chooses
        its default).
    """
    skip, needed = set(exclude), set(required)
    defaults, notes = dict(defaults or {}), dict(notes or {})
    for p in parameters(config):
        if p.name in skip:
            continue
        if dataclasses.is_dataclass(p.kind):
            group = parser.add_argument_group(f"{p.name}: {p.info.help}")
            hints = typing.get_type_hints(p.kind)
            for f in dataclasses.fields(p.kind):
                group.add_argument(
                    option_name(f"{p.name}_{f.name}"),
                    dest=f"{p.name}.{f.name}",
                    type=_PARSERS[hints[f.name]],
                    default=None,
                    help=f"{p.name}.{f.name} (default {f.default} once any of them is given)",
                )
            continue
        default = defaults.get(p.name)
        shown = default if p.name in defaults else p.default
        if p.name in notes:
            text = f"{p.info.help}; {notes[p.name]}"
        else:
            text = p.info.help + ("" if shown is None else f" (default {_shown(shown)})")
        kwargs: dict[str, Any] = {"default": default, "dest": p.name, "help": text}
        if p.name in needed:
            kwargs["required"] = True
        if p.kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif p.kind is tuple:
            arity = _tuple_arity(config, p.name)
            if arity is None:
                kwargs |= {"type": parse_float_list, "metavar": "X1,X2,..."}
            else:
                kwargs |= {"type": parse_float, "nargs": arity}
                if p.info.metavar is not None:
                    kwargs["metavar"] = p.info.metavar
        else:
            kwargs["type"] = _PARSERS[p.kind]
            if p.info.choices is not None:
                kwargs["choices"] = p.info.choices
        parser.add_argument(option_name(p.name), **kwargs)


def config_kwargs(config: type, namespace: argparse.Namespace) -> dict[str, Any]:
    """The options :func:`add_config_arguments` added that have a value, as config fields
    (a nested configuration is built from the fields given, the others at their defaults)."""
    out: dict[str, Any] = {}
    for p in parameters(config):
        if dataclasses.is_dataclass(p.kind):
            given = {
                f.name: getattr(namespace, f"{p.name}.{f.name}")
                for f in dataclasses.fields(p.kind)
                if getattr(namespace, f"{p.name}.{f.name}", None) is not None
            }
            if given:
                out[p.name] = p.kind(**given)
            continue
        value = getattr(namespace, p.name, None)
        if value is not None:
            out[p.name] = tuple(value) if p.kind is tuple else value
    return out


__all__ = [
    "ParamInfo",
    "Parameter",
    "add_config_arguments",
    "config_from_table",
    "config_kwargs",
    "job_parameters",
    "option_name",
    "param",
    "parameter_names",
    "parameters",
    "parse_float",
    "parse_float_list",
    "parse_int",
    "secret_parameters",
]
