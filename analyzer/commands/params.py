"""The CLI's parameter types, in the manner of click's ``ParamType``: each option that takes a number or a choice names
its type here (typer's ``parser=``), which converts the command-line text or refuses it in one plain sentence, shown
as click shows a bad value ("Invalid value for '--limit': 'abc' is not a whole number"). Without them typer words a
bad value as its validation library does ("Input should be a valid integer, unable to parse string as an integer").

``tests/test_cli_params.py`` feeds a bad value to every such option of every command."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, NoReturn, TypeVar

import typer

E = TypeVar("E", bound=Enum)


class ParamType:
    """``convert`` a command-line value (text, or the option's default as it is), or ``fail`` with the sentence."""

    def __call__(self, value: Any) -> Any:
        return self.convert(value)

    def convert(self, value: Any) -> Any:
        raise NotImplementedError

    def fail(self, message: str) -> NoReturn:
        raise typer.BadParameter(message)


@dataclass(frozen=True)
class WholeNumber(ParamType):
    """An integer, at least ``min``."""

    min: int | None = None

    def convert(self, value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            try:
                n = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a whole number")
        if self.min is not None and n < self.min:
            self.fail(f"{n} is not in the range x>={self.min}")
        return n


@dataclass(frozen=True)
class Number(ParamType):
    """A real number."""

    def convert(self, value: Any) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not a number")


@dataclass(frozen=True)
class Choice(ParamType, Generic[E]):
    """One of an enum's values (exactly as written); --help lists them from the enum itself."""

    enum: type[E]

    def convert(self, value: Any) -> E:
        if isinstance(value, self.enum):
            return value
        for member in self.enum:
            if member.value == value:
                return member
        self.fail(f"{value!r} is not one of {', '.join(repr(m.value) for m in self.enum)}.")


def whole_number(*decls: str, min: int | None = None, **kw: Any) -> Any:
    """``typer.Option(*decls, **kw)`` taking a ``WholeNumber`` of at least ``min`` (which --help shows: ``[x>=1]``)."""
    return typer.Option(*decls, min=min, parser=WholeNumber(min), **kw)


def number(*decls: str, **kw: Any) -> Any:
    """``typer.Option(*decls, **kw)`` taking a ``Number``."""
    return typer.Option(*decls, parser=Number(), **kw)


def choice(enum: type[Enum], *decls: str, **kw: Any) -> Any:
    """``typer.Option(*decls, **kw)`` taking one of ``enum``'s values."""
    return typer.Option(*decls, parser=Choice(enum), **kw)
