"""One coercion of YAML values to a config dataclass's field types, with one clear refusal.

YAML 1.1 (PyYAML) reads ``1e-6`` as the string ``'1e-6'`` (it wants ``1.0e-6``) and a quoted ``"3"`` as a
string, so a config read from a file may hold strings where a dataclass expects numbers, and the mistake
only surfaces deep inside training (``TypeError: '>' not supported``). :func:`coerce_fields` turns each value
into its field's annotated type before the dataclass is built — ``'1e-6'`` → ``1e-06``, ``"3"`` → ``3``,
``"true"`` → ``True`` — and refuses what cannot be read (``max_steps: ten``) with a :class:`ConfigError`
naming the key, the value and what is allowed.

Every stage config goes through it (:meth:`star_lib.experiments.stages.Stage.resolve_config` for the section's
own fields and for the fields it passes to the stage package's config: ``SFTRunConfig``, ``RLRunConfig``,
``RolloutConfig``, …), and so does ``star rl``'s YAML loader. Scalars (``int``, ``float``, ``bool``, ``str``,
``None``, ``Literal``), their unions and tuples/lists of them are coerced; other annotations (nested
dataclasses, mappings, ``Any``) pass through to the dataclass's own checks.
"""

from __future__ import annotations

import math
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

from star_lib.experiments.config import ConfigError

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_SCALARS = (int, float, bool, str, type(None))


class _Refused(Exception):
    """A value that does not fit an annotation (turned into a :class:`ConfigError` by the caller)."""


def field_types(cls: type) -> dict[str, Any]:
    """Field name → resolved annotation of dataclass ``cls``.

    A name the annotation cannot resolve (a ``TYPE_CHECKING``-only import) reads as ``Any``: that field is
    left to the dataclass's own checks.
    """
    return dict(typing.get_type_hints(cls, localns=_Lenient(sys.modules[cls.__module__])))


class _Lenient(dict):
    """A module's names for resolving annotations; a name it lacks (a type-checking import) is ``Any``."""

    def __init__(self, module: types.ModuleType) -> None:
        super().__init__()
        self.module = module

    def __missing__(self, key: str) -> Any:
        import builtins

        found = vars(self.module).get(key, getattr(builtins, key, Any))
        return found


def describe(hint: Any) -> str:
    """Say what an annotation allows, in words (``an integer or null``)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in args)
    if origin is typing.Literal:
        return f"one of {list(args)}"
    if origin in (tuple, list):
        items = [a for a in args if a is not Ellipsis]
        if len(items) == 1 or (args and args[-1] is Ellipsis):
            return f"a list of {_plural(describe(items[0]))}" if items else "a list"
        return f"a list of {len(items)} values ({', '.join(describe(a) for a in items)})"
    return {
        int: "an integer",
        float: "a number",
        bool: "true or false",
        str: "a string",
        type(None): "null",
    }.get(hint, getattr(hint, "__name__", str(hint)))


def _plural(text: str) -> str:
    return {"an integer": "integers", "a number": "numbers", "a string": "strings"}.get(text, text)


def coerce_value(hint: Any, value: Any) -> Any:
    """Return ``value`` as ``hint``'s type (see the module docstring).

    Raises:
        _Refused: when the value cannot be read as that type.

    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        members = [a for a in args if a is not type(None)]
        exact = [a for a in members if a in _SCALARS and type(value) is a]  # 3 for int | str stays 3
        for member in exact + [m for m in members if m not in exact]:
            try:
                return coerce_value(member, value)
            except _Refused:
                continue
        raise _Refused
    if origin is typing.Literal:
        if value in args:
            return value
        matches = [a for a in args if str(a) == str(value)]
        if matches:
            return matches[0]
        raise _Refused
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise _Refused
        if args and args[-1] is not Ellipsis and len(args) != len(value):
            raise _Refused
        items = [
            coerce_value(args[0] if args and args[-1] is Ellipsis else (args[i] if args else Any), v)
            for i, v in enumerate(value)
        ]
        return tuple(items) if origin is tuple else items
    if hint is bool:
        return _to_bool(value)
    if hint is int:
        return _to_int(value)
    if hint is float:
        return _to_float(value)
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # model: 7 or world: 0 — the dataclass's own checks judge the text
        raise _Refused
    if hint is type(None):
        if value is None:
            return None
        raise _Refused
    return value  # nested dataclasses, mappings, Any: the dataclass checks them


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _Refused


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _Refused
    if isinstance(value, int):
        return value
    number = float(_to_float(value))
    if not number.is_integer():
        raise _Refused
    return int(number)


def _to_float(value: Any) -> float | int:
    if isinstance(value, bool):
        raise _Refused
    if isinstance(value, (int, float)):
        return value  # an int is a valid float (kept as written: stage keys stay the same)
    if isinstance(value, str):
        try:
            number = float(value.strip().replace("_", ""))
        except ValueError:
            raise _Refused from None
        if math.isfinite(number):
            return number
    raise _Refused


def coerce_fields(cls: type, values: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Return ``values`` with each one coerced to dataclass ``cls``'s annotation of that field.

    Keys that are no field of ``cls`` pass through unchanged (the caller reports unknown keys).

    Args:
        cls: The config dataclass.
        values: Field name → value as read from YAML (or the command line).
        where: Prefix of the key in messages, e.g. ``rl.`` or ``configs/rl.yaml: ``.

    Raises:
        ConfigError: naming the key, the value and what is allowed, for the first value that does not fit.

    """
    hints = field_types(cls)
    out = dict(values)
    for key, value in values.items():
        if key not in hints or value is None and _allows_none(hints[key]):
            continue
        try:
            out[key] = coerce_value(hints[key], value)
        except _Refused:
            allowed = describe(hints[key])
            raise ConfigError(f"{where}{key}: {value!r} is not allowed; give {allowed}") from None
    return out


def _allows_none(hint: Any) -> bool:
    return hint is Any or type(None) in typing.get_args(hint)
