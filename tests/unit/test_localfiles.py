"""Files as input: bounded in size and time, and every problem a line that names the file."""

import os
import re
import time
from pathlib import Path

import pytest

from toposched.localfiles import InputError, load_yaml, manifests, read_optional, read_text


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _device(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


def _large(path: Path) -> None:
    path.write_text("a" * 2049)


def _binary(path: Path) -> None:
    path.write_bytes(b"\xff\xfe\x00\x01")


def _nul(path: Path) -> None:
    path.write_text("a: 1\x00\n")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_fifo, "not a regular file"),
        (_directory, "is a directory, not a file"),
        (_device, "not a regular file"),
        (_loop, "Too many levels of symbolic links"),
        (_large, "larger than 2048 bytes"),
        (_binary, "not UTF-8 text (byte 0)"),
        (_nul, "binary data, not text"),
    ],
    ids=["fifo", "directory", "dev-zero", "symlink-loop", "too-large", "not-utf8", "nul"],
)
def test_what_is_not_a_small_text_file_is_refused_at_once(tmp_path: Path, make: object, message: str) -> None:
    path = tmp_path / "input"
    make(path)  # type: ignore[operator]
    started = time.monotonic()
    with pytest.raises(InputError, match=re.escape(message)) as info:
        read_text(path, limit=2048)
    assert time.monotonic() - started < 1  # a FIFO with no writer would block a plain open()
    assert str(info.value).startswith(f"{path}: ")


def test_a_missing_file(tmp_path: Path) -> None:
    assert read_optional(tmp_path / "absent") is None
    assert read_optional(tmp_path / "absent" / "deeper") is None
    with pytest.raises(InputError, match="No such file or directory"):
        read_text(tmp_path / "absent")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000, "nested more than 64 levels deep"),
        ("- " * 100_000 + "x", "nested more than 64 levels deep"),
        ("a: &a [*a]\n", "a YAML alias (*a) refers to the node it is in"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdef", "bcdefg", strict=True)),
            "more than 4000000 YAML nodes once aliases are expanded",
        ),
        ("date: 2024-02-30\n", "not YAML: day is out of range for month"),
        ("a: b: c\n", "not YAML: mapping values are not allowed in this context at line 1, column 5"),
        ("\t", "not YAML: found character that cannot start any token at line 1, column 1"),
        ("a: *nothing\n", "not YAML: found undefined alias at line 1, column 4"),
    ],
    ids=[
        "deep-flow",
        "deep-block",
        "recursive-alias",
        "alias-bomb",
        "impossible-date",
        "syntax",
        "tab",
        "undefined-alias",
    ],
)
def test_yaml_that_would_crash_or_blow_up_a_reader(text: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as info:
        load_yaml(text, "f.yaml")
    assert str(info.value).startswith("f.yaml: ")
    assert "\n" not in str(info.value)


def test_yaml_with_a_few_aliases_loads() -> None:
    assert load_yaml("a: &a [1, 2]\nb: [*a, *a]\n---\n---\nc: 1\n", "f.yaml") == [
        {"a": [1, 2], "b": [[1, 2], [1, 2]]},
        {"c": 1},
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "document 1: expected a Kubernetes object, not a list"),
        ("kind: A\n---\nplain\n", "document 2: expected a Kubernetes object, not a string"),
        ("kind: NodeList\nitems: 5\n", "document 1: items: expected a list"),
        ("kind: List\nitems: [{kind: Node}, 5]\n", "document 1: items[1]: expected an object, not a number"),
    ],
    ids=["list", "scalar-document", "items-not-a-list", "item-not-an-object"],
)
def test_manifests_are_objects(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=re.escape(message)):
        manifests(path)


def test_manifests_expand_lists(tmp_path: Path) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text("kind: NodeList\nitems: [{kind: Node, metadata: {name: a}}]\n---\nkind: Pod\n")
    assert [d["kind"] for d in manifests(path)] == ["Node", "Pod"]
