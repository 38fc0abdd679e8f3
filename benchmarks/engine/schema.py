"""Build typed dataclasses from YAML mappings, with errors that name the field.

Every spec section is a frozen dataclass.  :func:`from_mapping` checks that the mapping
has no unknown keys (suggesting the closest known one), that required fields are there,
and converts each value according to the field's type hint or its ``metadata["unit"]``:

- ``"bytes"``: an integer, or a string with a unit: ``200KB`` (SI, 1000), ``10MiB``
  (binary, 1024), ``1.5GB``;
- ``"seconds"``: a number of seconds, or ``25us`` / ``10ms`` / ``2s``;
- ``"mbit"``: a number of Mbit/s, or ``100M`` / ``1G`` / ``500k``.

``metadata["choices"]`` restricts a string field to a set of values.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class SpecFileError(ValueError):
    """A bad experiment spec; the message starts with the offending field's path."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


_BYTE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "k": 1000,
               "m": 1000**2, "g": 1000**3, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
_RATE_UNITS = {"": 1.0, "m": 1.0, "mbit": 1.0, "mbps": 1.0, "k": 1e-3, "kbit": 1e-3,
               "kbps": 1e-3, "g": 1e3, "gbit": 1e3, "gbps": 1e3}
_NUMBER_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def _with_unit(value: Any, units: Mapping[str, float], what: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected {what}, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = _NUMBER_UNIT.match(value)
        if match and match.group(2).lower() in units:
            return float(match.group(1)) * units[match.group(2).lower()]
    raise ValueError(f"expected {what}, got {value!r}")


def parse_bytes(value: Any) -> int:
    nbytes = _with_unit(value, _BYTE_UNITS, "a size in bytes (e.g. 32000, 200KB, 10MB)")
    if nbytes != int(nbytes):
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(nbytes)


def parse_seconds(value: Any) -> float:
    return _with_unit(value, _TIME_UNITS, "a time in seconds (e.g. 2.5, 10ms, 25us)")


def parse_mbit(value: Any) -> float:
    return _with_unit(value, _RATE_UNITS, "a rate in Mbit/s (e.g. 100, 100M, 1G)")


_UNIT_PARSERS = {"bytes": parse_bytes, "seconds": parse_seconds, "mbit": parse_mbit}


def read_yaml(path: Path) -> Any:
    """A YAML file's data; ValueError saying why it cannot be had (unreadable, or not
    YAML, with the line)."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ValueError(f"cannot read it: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ValueError(f"not valid YAML{where}: "
                         f"{getattr(exc, 'problem', None) or exc}") from None


def unknown_keys(data: Mapping[str, Any], known: list[str], path: str) -> None:
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecFileError(join(path, str(key)),
                                f"unknown field{hint}; known fields: {', '.join(known)}")


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def from_mapping(cls: type[T], data: Any, path: str) -> T:
    """An instance of dataclass ``cls`` from ``data`` (None means all defaults)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SpecFileError(path, f"expected a mapping of fields, got {type(data).__name__}")
    fields = [f for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    unknown_keys(data, [f.name for f in fields], path)
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields:
        where = join(path, f.name)
        if f.name not in data:
            if (f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING):
                raise SpecFileError(where, "required field is missing")
            continue
        values[f.name] = convert(data[f.name], hints[f.name], where, f.metadata)
    try:
        return cls(**values)
    except ValueError as exc:  # __post_init__ checks across fields
        if isinstance(exc, SpecFileError):
            raise
        raise SpecFileError(path, str(exc)) from None


def convert(value: Any, hint: Any, where: str, metadata: Mapping[str, Any] | None = None) -> Any:
    metadata = metadata or {}
    if hint is Any:
        return value  # free-form (e.g. switch options passed through to the switch)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return convert(value, inner[0], where, metadata)
        raise TypeError(f"unsupported union {hint}")  # schema bug, not a user error
    if value is None:
        raise SpecFileError(where, "must not be empty")
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            value = [value]  # a single value where a list is expected
        item = args[0]
        converted = [convert(v, item, join(where, i), metadata) for i, v in enumerate(value)]
        return tuple(converted) if origin is tuple else converted
    if origin is dict:
        if not isinstance(value, Mapping):
            raise SpecFileError(where, f"expected a mapping, got {value!r}")
        return {str(k): convert(v, args[1], join(where, str(k)), metadata)
                for k, v in value.items()}
    unit = metadata.get("unit")
    try:
        if unit is not None:
            result: Any = _UNIT_PARSERS[unit](value)
        elif hint is bool:
            if not isinstance(value, bool):
                raise ValueError(f"expected true or false, got {value!r}")
            result = value
        elif hint is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"expected an integer, got {value!r}")
            result = value
        elif hint is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"expected a number, got {value!r}")
            result = float(value)
        elif hint is str:
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ValueError(f"expected a string, got {value!r}")
            result = str(value)
        elif dataclasses.is_dataclass(hint):
            return from_mapping(hint, value, where)
        else:
            raise TypeError(f"unsupported type {hint}")
    except SpecFileError:
        raise  # a nested mapping's error already names its own path
    except ValueError as exc:
        raise SpecFileError(where, str(exc)) from None
    choices = metadata.get("choices")
    if choices is not None and result not in choices:
        close = difflib.get_close_matches(str(result), [str(c) for c in choices], n=1)
        hint_text = f" (did you mean {close[0]!r}?)" if close else ""
        raise SpecFileError(where, f"{result!r} is not one of {', '.join(map(str, choices))}"
                            f"{hint_text}")
    low = metadata.get("min")
    if low is not None and result < low:
        raise SpecFileError(where, f"must be >= {low}, got {result}")
    high = metadata.get("max")
    if high is not None and result > high:
        raise SpecFileError(where, f"must be <= {high}, got {result}")
    return result


def field(default: Any = dataclasses.MISSING, *, unit: str | None = None,
          choices: tuple[Any, ...] | None = None, min: float | None = None,  # noqa: A002
          max: float | None = None, doc: str = "") -> Any:  # noqa: A002
    """A dataclass field with conversion metadata (see module doc)."""
    metadata = {"unit": unit, "choices": choices, "min": min, "max": max, "doc": doc}
    if isinstance(default, list | dict):
        frozen = default
        return dataclasses.field(default_factory=lambda: type(frozen)(frozen),
                                 metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)
