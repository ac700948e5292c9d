"""Typed argument parsing: turn a dataclass (e.g. `ProtocolConfig`) into argparse options."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0 (seeds)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def pos_int(text: str) -> int:
    """argparse type: an integer >= 1 (sizes, counts)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(element type, is_tuple) of a field annotation, dropping Optional."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _base_type(args[0])
    if origin is tuple:
        return typing.get_args(tp)[0], True
    return tp, False


def add_dataclass_args(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """One ``--field-name`` option per dataclass field (bools get ``--x/--no-x``)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or typing.get_origin(hints[f.name]) is dict:
            continue
        tp, many = _base_type(hints[f.name])
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else None
        if tp is bool:
            parser.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None, help=f"(default {default})"
            )
        else:
            conv = Path if tp is Path else tp
            parser.add_argument(
                flag, type=conv, nargs="+" if many else None, default=None, help=f"(default {default})"
            )


def dataclass_from_args(cls: type[T], args: argparse.Namespace, base: T | None = None) -> T:
    """A `cls` instance from parsed options; options left unset keep `base`'s (or the default)."""
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value = getattr(args, f.name, None)
        if value is not None:
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return dataclasses.replace(base, **values) if base is not None else cls(**values)  # type: ignore[type-var]
