"""Does a value (as JSON gives it back) have the shape a TypedDict declares?

Used by the state-file tests: the writer's output, after a JSON round trip, is checked
against :class:`dcnlab.model.runtime.ControllerState` key by key and type by type.
"""

from __future__ import annotations

import types
import typing
from typing import Any


def mismatches(value: Any, expected: Any, where: str = "state") -> list[str]:
    """Every place where ``value`` differs from ``expected``; [] when it matches."""
    if typing.is_typeddict(expected):
        return _typeddict(value, expected, where)
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin in (types.UnionType, typing.Union):
        arms = [mismatches(value, arm, where) for arm in args]
        return [] if any(not arm for arm in arms) else [
            f"{where}: {value!r} is none of {expected}"]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        key_type, value_type = args
        out = [f"{where}: key {k!r} is not {key_type.__name__}" for k in value
               if not isinstance(k, key_type)]
        for k, v in value.items():
            out += mismatches(v, value_type, f"{where}[{k!r}]")
        return out
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: expected an array, got {value!r}"]
        return [m for i, item in enumerate(value) for m in mismatches(item, args[0],
                                                                       f"{where}[{i}]")]
    if origin is tuple:  # JSON has no tuples: a fixed-length array
        if not isinstance(value, list) or len(value) != len(args):
            return [f"{where}: expected an array of {len(args)}, got {value!r}"]
        return [m for i, (item, arg) in enumerate(zip(value, args, strict=True))
                for m in mismatches(item, arg, f"{where}[{i}]")]
    return [] if _scalar_ok(value, expected) else [
        f"{where}: expected {getattr(expected, '__name__', expected)}, got {value!r}"]


def _typeddict(value: Any, expected: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected an object, got {value!r}"]
    hints = typing.get_type_hints(expected)
    out = [f"{where}: missing key {k!r}" for k in sorted(expected.__required_keys__)
           if k not in value]
    out += [f"{where}: undeclared key {k!r}" for k in sorted(value) if k not in hints]
    for key, item in value.items():
        if key in hints:
            out += mismatches(item, hints[key], f"{where}.{key}")
    return out


def _scalar_ok(value: Any, expected: Any) -> bool:
    if expected is type(None):
        return value is None
    if isinstance(value, bool) or expected is bool:  # bool is an int in Python, not in JSON
        return isinstance(value, bool) and expected is bool
    if expected is float:  # any JSON number: a writer may put an int where a float goes
        return isinstance(value, (int, float))
    return isinstance(value, expected)
