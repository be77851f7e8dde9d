"""toposched.settings: a flag beats its variables, which beat the default; bad variables are one line."""

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import pytest

from toposched.settings import Setting, SettingsError, add_arguments, add_flag, boolean, build


def _computed() -> str:
    return "computed"


@dataclass(frozen=True)
class Example:
    port: Annotated[int, Setting("--port", env="EX_PORT", help="a port")] = 8080
    name: Annotated[str, Setting("--name", env=("EX_NAME", "EX_FALLBACK"), help="a name")] = "plain"
    computed: Annotated[str, Setting("--computed", env="EX_COMPUTED", shown="worked out", help="at start")] = field(
        default_factory=_computed
    )
    path: Annotated[Path | None, Setting("--path", env="EX_PATH", help="a file")] = None
    mode: Annotated[str, Setting("--mode", env="EX_MODE", choices=("a", "b"), help="one of two")] = "a"
    loud: Annotated[bool, Setting("--loud", env="EX_LOUD", help="a switch")] = False
    names: Annotated[tuple[str, ...], Setting("--item", env="EX_ITEM", help="repeatable")] = ("first",)
    on: Annotated[bool, Setting(env="EX_ON", help="from the environment only")] = True
    ratio: Annotated[float, Setting(env="EX_RATIO", help="a float")] = 0.5
    internal: float = 1.0


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(prog="example")
    add_arguments(found, Example)
    return found


def settings(argv: list[str], environ: dict[str, str]) -> Example:
    return build(Example, parser().parse_args(argv), environ)


@pytest.mark.parametrize(
    ("argv", "environ", "name", "expected"),
    [
        pytest.param([], {}, "port", 8080, id="default"),
        pytest.param([], {"EX_PORT": "9000"}, "port", 9000, id="variable-beats-default"),
        pytest.param(["--port", "7000"], {"EX_PORT": "9000"}, "port", 7000, id="flag-beats-variable"),
        pytest.param([], {"EX_PORT": ""}, "port", 8080, id="empty-variable-is-not-set"),
        pytest.param(["--name", ""], {"EX_NAME": "env"}, "name", "env", id="empty-flag-is-not-given"),
        pytest.param([], {"EX_NAME": "first", "EX_FALLBACK": "second"}, "name", "first", id="variables-in-order"),
        pytest.param([], {"EX_FALLBACK": "second"}, "name", "second", id="second-variable"),
        pytest.param([], {}, "computed", "computed", id="default-factory"),
        pytest.param([], {"EX_COMPUTED": "told"}, "computed", "told", id="variable-beats-factory"),
        pytest.param([], {"EX_PATH": "/x"}, "path", Path("/x"), id="optional-path"),
        pytest.param([], {}, "path", None, id="optional-default"),
        pytest.param([], {"EX_MODE": "b"}, "mode", "b", id="choice-from-variable"),
        pytest.param([], {}, "loud", False, id="switch-default"),
        pytest.param(["--loud"], {}, "loud", True, id="switch-flag"),
        pytest.param([], {"EX_LOUD": "TRUE"}, "loud", True, id="switch-variable"),
        pytest.param([], {"EX_LOUD": "0"}, "loud", False, id="switch-variable-false"),
        pytest.param([], {}, "names", ("first",), id="repeated-default"),
        pytest.param([], {"EX_ITEM": "env"}, "names", ("env",), id="repeated-variable"),
        pytest.param(["--item", "x", "--item", "y"], {"EX_ITEM": "env"}, "names", ("x", "y"), id="repeated-flags"),
        pytest.param([], {"EX_ON": "no"}, "on", False, id="boolean-variable"),
        pytest.param([], {"EX_RATIO": "0.25"}, "ratio", 0.25, id="float-variable"),
        pytest.param([], {}, "internal", 1.0, id="not-a-setting"),
    ],
)
def test_flag_beats_variable_beats_default(
    argv: list[str], environ: dict[str, str], name: str, expected: object
) -> None:
    assert getattr(settings(argv, environ), name) == expected


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"EX_PORT": "eighty"}, "$EX_PORT: invalid int value: 'eighty'"),
        ({"EX_RATIO": "half"}, "$EX_RATIO: invalid float value: 'half'"),
        ({"EX_MODE": "c"}, "$EX_MODE: invalid choice: 'c' (choose from 'a', 'b')"),
        ({"EX_ON": "maybe"}, "$EX_ON: invalid boolean value: 'maybe'"),
    ],
    ids=["int", "float", "choice", "boolean"],
)
def test_a_bad_variable_is_one_line_naming_it(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        settings([], environ)
    assert str(caught.value) == message


def test_a_bad_variable_is_ignored_when_the_flag_is_given() -> None:
    assert settings(["--port", "1"], {"EX_PORT": "eighty"}).port == 1


def test_a_bad_flag_is_argparse_s_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parser().parse_args(["--port", "eighty"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "example: error: argument --port: invalid int value: 'eighty'"


def test_help_names_variables_and_defaults() -> None:
    text = parser().format_help()
    assert "a port ($EX_PORT; default: 8080)" in " ".join(text.split())
    assert "a name ($EX_NAME, else $EX_FALLBACK; default: plain)" in " ".join(text.split())
    assert "at start ($EX_COMPUTED; default: worked out)" in " ".join(text.split())
    assert "settings read from the environment only:" in text
    assert "  $EX_ON" in text
    assert "from the environment only (default: true)" in text
    assert "a float (default: 0.5)" in text


def test_without_flags_the_environment_decides() -> None:
    assert build(Example, None, {"EX_PORT": "1", "EX_ON": "false"}) == Example(port=1, on=False)


@pytest.mark.parametrize(("text", "value"), [("1", True), ("Yes", True), ("false", False), ("NO", False)])
def test_boolean(text: str, value: bool) -> None:
    assert boolean(text) is value


def borrowing() -> argparse.ArgumentParser:
    """A command with two of Example's flags, its own defaults and notes, and no variables."""
    found = argparse.ArgumentParser(prog="other")
    add_flag(found, Example, "port", default=1)
    add_flag(found, Example, "path", note="else: none")
    add_flag(found, Example, "mode", required=True)
    return found


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["--mode", "b"], {"port": 1, "path": None, "mode": "b"}, id="own-defaults"),
        pytest.param(
            ["--mode", "a", "--port", "2", "--path", "/x"], {"port": 2, "path": Path("/x"), "mode": "a"}, id="typed"
        ),
    ],
)
def test_a_borrowed_flag_reads_the_command_line_only(
    argv: list[str], expected: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EX_PORT", "9000")
    assert vars(borrowing().parse_args(argv)) == expected


def test_a_borrowed_flag_keeps_its_help_and_checks() -> None:
    text = " ".join(borrowing().format_help().split())
    assert "--port PORT a port (default: 1)" in text
    assert "--path PATH a file (else: none)" in text
    assert "--mode {a,b} one of two" in text
    assert "$EX_" not in text
    with pytest.raises(SystemExit):
        borrowing().parse_args(["--mode", "c"])
