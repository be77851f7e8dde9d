"""Local files as input: manifests, configuration and sysfs, read with bounded size and time.

A file is opened without blocking and read only when it is a regular file, so a FIFO, a device
or a directory where a file should be is an error, not a hang; a file larger than the limit, or
not UTF-8 text, is an error too. YAML is first walked as a stream of parser events (iterative, so
no nesting depth crashes it) to refuse documents nested too deeply or whose aliases would expand
beyond a bound, before it is loaded. Every error is an ``InputError`` whose message names the file.
"""

import errno
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from toposched.apis.limits import MAX_FILE_BYTES

MAX_DEPTH = 64
"""Nesting of YAML collections: Kubernetes objects need about a dozen."""
MAX_NODES = 4_000_000
"""YAML nodes after aliases are expanded (about twice what a 16 MiB file of objects holds)."""
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InputError(ValueError):
    """A file (or part of one) that cannot be used; the message names it and says why, on one line."""


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The text of a regular file of at most ``limit`` bytes; InputError otherwise (also when missing)."""
    text = read_optional(path, limit)
    if text is None:
        raise InputError(f"{path}: {os.strerror(errno.ENOENT)}")
    return text


def read_optional(path: Path, limit: int = MAX_FILE_BYTES) -> str | None:
    """Like ``read_text``, but None when the file (or a directory on its path) does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: not a regular file")
        if info.st_size > limit:
            raise InputError(f"{path}: larger than {limit} bytes")
        chunks, size = [], 0
        while chunk := os.read(fd, limit + 1 - size):  # sysfs and procfs files report no true size
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise InputError(f"{path}: larger than {limit} bytes")
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return decode(b"".join(chunks), str(path))


def decode(data: bytes, where: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise InputError(f"{where}: binary data, not text")
    return text


def load_yaml(text: str, where: str) -> list[Any]:
    """The YAML (or JSON) documents of ``text``, empty ones left out; InputError naming ``where``."""
    try:
        _check_shape(text, where)
        return [doc for doc in yaml.load_all(text, Loader=_LOADER) if doc is not None]
    except yaml.YAMLError as exc:
        raise InputError(f"{where}: not YAML: {_yaml_problem(exc)}") from None
    except InputError:
        raise
    except (RecursionError, MemoryError):
        raise InputError(f"{where}: not YAML a program can read (nested too deeply)") from None
    except (ValueError, OverflowError, TypeError) as exc:  # a value the constructor refuses (2024-02-30)
        raise InputError(f"{where}: not YAML: {' '.join(str(exc).split())}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{exc.problem or exc.context or 'malformed'}{where}"
    return " ".join(str(exc).split())


def _check_shape(text: str, where: str) -> None:
    """Refuse deep nesting (the C loader recurses per level) and alias bombs, from parser events."""
    sizes: dict[str, int] = {}
    open_anchors: list[str | None] = []
    counts = [0]
    total = 0
    for event in yaml.parse(text, Loader=_LOADER):
        added = 0
        if isinstance(event, yaml.DocumentStartEvent):
            sizes.clear()  # anchors are per document
        elif isinstance(event, yaml.ScalarEvent):
            added = 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise InputError(f"{where}: a YAML alias (*{event.anchor}) refers to the node it is in")
            added = sizes.get(event.anchor or "", 0)
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(open_anchors) >= MAX_DEPTH:
                raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep")
            open_anchors.append(event.anchor)
            counts.append(1)
            total += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = open_anchors.pop(), counts.pop()
            counts[-1] += size
            if anchor:
                sizes[anchor] = size
        counts[-1] += added
        total += added
        if total > MAX_NODES:
            raise InputError(f"{where}: more than {MAX_NODES} YAML nodes once aliases are expanded")


def manifests(path: Path, text: str | None = None) -> list[dict[str, Any]]:
    """The Kubernetes objects in a file (a stream of documents, or ``kind: *List`` with items).

    ``text`` stands for the file's content when it was read already (e.g. standard input)."""
    where = str(path)
    docs = load_yaml(read_text(path) if text is None else text, where)
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise InputError(f"{where}: document {i + 1}: expected a Kubernetes object, not {_kind_of(doc)}")
        if str(doc.get("kind", "")).endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{where}: document {i + 1}: items: expected a list")
            for j, item in enumerate(items):
                if not isinstance(item, dict):
                    raise InputError(f"{where}: document {i + 1}: items[{j}]: expected an object, not {_kind_of(item)}")
                out.append(item)
        else:
            out.append(doc)
    return out


def _kind_of(value: object) -> str:
    return {str: "a string", list: "a list", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
