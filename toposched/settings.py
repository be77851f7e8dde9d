"""A command's settings: its flag, else its environment variable, else its default.

Each component declares its settings once, as a frozen dataclass (a ``Settings``) whose fields
carry their default and, in ``Annotated`` metadata, a ``Setting``: the flags and variables the value may come
from and its help. ``add_arguments`` turns them into argparse flags whose help names the variables
and the default; ``build`` resolves every field: a flag given on the command line wins, then the
first of its variables that is set, then the field's default. An empty flag or variable (a chart
value left blank) counts as not given. A bad flag is argparse's one line and exit 2; a bad
variable raises ``SettingsError``, which ``toposched.cli`` turns into one line and exit 2 as well.

Text is read as the field's type says (``int``, ``float``, ``Path``, ``str``; ``bool`` is a flag
without a value, or true/false in a variable; ``tuple[X, ...]`` a repeatable flag), unless the
``Setting`` names its own ``parse``.
"""

import argparse
import dataclasses
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

T = TypeVar("T")


class SettingsError(ValueError):
    """A variable that cannot be read: one line naming it."""


class Setting:
    """Where a dataclass field's value may come from: ``Annotated[int, Setting("--port", ...)]``."""

    def __init__(
        self,
        *flags: str,
        env: str | tuple[str, ...] = (),
        help: str = "",
        parse: Callable[[str], Any] | None = None,
        choices: tuple[str, ...] = (),
        shown: str | None = None,
        metavar: str | None = None,
    ) -> None:
        self.flags = flags
        self.env = (env,) if isinstance(env, str) else env
        self.help = help
        self.parse = parse
        self.choices = choices
        self.shown = shown
        """The default as --help gives it, when it is computed at start (an address, a host name)."""
        self.metavar = metavar


@dataclass(frozen=True)
class _Field:
    """A declared setting with what its type says about reading it."""

    name: str
    setting: Setting
    parse: Callable[[str], Any]
    switch: bool
    """A bool with a flag: the flag takes no value."""
    repeated: bool
    shown: Any
    """The default as --help gives it (None: not at all)."""

    def read(self, variable: str, text: str) -> Any:
        choices = self.setting.choices
        if choices and text not in choices:
            raise SettingsError(f"${variable}: invalid choice: {text!r} (choose from {', '.join(map(repr, choices))})")
        try:
            value = self.parse(text)
        except ValueError:
            # As argparse says it of a flag: "invalid int value: 'x'".
            raise SettingsError(f"${variable}: invalid {self.parse.__name__} value: {text!r}") from None
        return (value,) if self.repeated else value

    def described(self, variables: tuple[str, ...], lead: str = "") -> str:
        """The help, with ``variables`` and the default: ``a port ($PORT; default: 8080)``."""
        told = [lead + ", else ".join(f"${v}" for v in variables)] if variables else []
        if not self.switch and self.shown not in (None, (), ""):
            told.append(f"default: {_shown(self.shown)}")
        return f"{self.setting.help} ({'; '.join(told)})" if told else self.setting.help


def boolean(text: str) -> bool:
    """true/yes/1 or false/no/0, in any case."""
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise ValueError(text)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()  # as a variable says it
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ", ".join(map(str, value))
    return str(value)


def _reader(kind: Any) -> tuple[Callable[[str], Any], bool]:
    """How to read the text of a value of type ``kind``, and whether it is repeated."""
    if typing.get_origin(kind) is tuple:
        return _reader(typing.get_args(kind)[0])[0], True
    if isinstance(kind, types.UnionType):  # X | None: None is the default, never read
        (kind,) = [arg for arg in typing.get_args(kind) if arg is not type(None)]
    if kind is bool:
        return boolean, False
    if kind in (int, float, str, Path):
        return kind, False
    raise TypeError(f"no reader for {kind!r}: give the Setting a parse")


def _fields(cls: type) -> list[_Field]:
    hints = typing.get_type_hints(cls, include_extras=True)
    found = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        setting = next((m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Setting)), None)
        if setting is None:
            continue  # not a setting: always its default
        parse, repeated = _reader(typing.get_args(hint)[0])
        shown = setting.shown if setting.shown is not None else f.default  # MISSING: a default_factory
        switch = parse is boolean and bool(setting.flags)
        found.append(
            _Field(
                f.name,
                setting,
                setting.parse or parse,
                switch,
                repeated,
                None if shown is dataclasses.MISSING else shown,
            )
        )
    return found


def _argument(f: _Field) -> dict[str, Any]:
    """argparse's keywords for the flag of ``f``, but its default and help."""
    kwargs: dict[str, Any] = {"dest": f.name}
    if f.switch:
        kwargs["action"] = "store_true"
        return kwargs
    kwargs["type"] = f.parse
    if f.setting.choices:
        kwargs["choices"] = f.setting.choices
    else:  # as argparse names it after the flag (the field's name may be a plural)
        kwargs["metavar"] = f.setting.metavar or f.setting.flags[-1].lstrip("-").replace("-", "_").upper()
    if f.repeated:
        kwargs["action"] = "append"
    return kwargs


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """A flag for every setting of ``cls`` that has one; the others are listed after the flags."""
    unflagged = []
    for f in _fields(cls):
        flags = f.setting.flags
        if not flags:
            first, *others = f.setting.env
            unflagged.append(f"  ${first:<35} {f.described(tuple(others), lead='else ')}")
            continue
        parser.add_argument(*flags, **_argument(f), default=None, help=f.described(f.setting.env))
    if unflagged:
        parser.epilog = "\n".join(["settings read from the environment only:", *unflagged])
        parser.formatter_class = argparse.RawDescriptionHelpFormatter  # one line per variable


def add_flag(
    parser: argparse.ArgumentParser,
    cls: type,
    name: str,
    *,
    default: Any = None,
    required: bool = False,
    note: str = "",
) -> None:
    """The flag of ``cls``'s setting ``name`` alone, read from the command line only, with a default
    of the command's own: for a command that shares a component's flags but neither its variables
    nor its defaults. ``note`` says what leaving the flag out means (else the help gives the default)."""
    (f,) = [f for f in _fields(cls) if f.name == name]
    told = note or (f"default: {_shown(default)}" if default is not None else "")
    text = f"{f.setting.help} ({told})" if told else f.setting.help
    parser.add_argument(*f.setting.flags, **_argument(f), default=default, required=required, help=text)


def build(cls: type[T], args: argparse.Namespace | None, environ: Mapping[str, str] | None = None) -> T:
    """``cls`` from the flags in ``args`` (None: no flags, as under ``kopf run``), else the
    environment, else the defaults. Raises SettingsError for a variable that cannot be read."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in _fields(cls):
        given = getattr(args, f.name, None) if args is not None else None
        if given is not None and given != "":
            values[f.name] = tuple(given) if f.repeated else given
            continue
        for variable in f.setting.env:
            text = environ.get(variable)
            if text:
                values[f.name] = f.read(variable, text)
                break
    return cls(**values)


class Settings:
    """The base of a component's settings dataclass."""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser, cls)

    @classmethod
    def add_flag(
        cls, parser: argparse.ArgumentParser, name: str, *, default: Any = None, required: bool = False, note: str = ""
    ) -> None:
        """One setting's flag for another command (``add_flag``)."""
        add_flag(parser, cls, name, default=default, required=required, note=note)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        """The command's flags, then the environment, then the defaults."""
        return build(cls, args)

    @classmethod
    def from_env(cls) -> Self:
        """The environment, then the defaults (no flags: under ``kopf run``)."""
        return build(cls, None)
