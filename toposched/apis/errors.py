"""Validation errors as people read them: one line per problem, naming the field, without links."""

from pydantic import ValidationError

MAX_PROBLEMS = 20
"""Problems listed before "and N more": a garbled file should not flood a terminal or a condition."""
_PREFIXES = ("Value error, ", "Assertion failed, ")


def field_path(loc: tuple[int | str, ...]) -> str:
    """``('spec', 'workloads', 0, 'workload')`` -> ``spec.workloads[0].workload``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def problems(exc: ValidationError, prefix: str = "") -> list[str]:
    """``field: what is wrong`` for each problem pydantic found (``prefix`` goes before every field)."""
    lines = []
    for error in exc.errors(include_url=False):
        message = str(error["msg"])
        for known in _PREFIXES:
            message = message.removeprefix(known)
        where = field_path(tuple(error["loc"]))
        where = f"{prefix}.{where}" if prefix and where else prefix or where
        lines.append(f"{where}: {message}" if where else message)
    if len(lines) > MAX_PROBLEMS:
        lines = [*lines[:MAX_PROBLEMS], f"and {len(lines) - MAX_PROBLEMS} more problems"]
    return [" ".join(line.split()) for line in lines]  # one line each, whatever the message held


def describe(exc: Exception, prefix: str = "") -> str:
    """One line for any parse error: the problems of a ValidationError joined by ``; ``."""
    if isinstance(exc, ValidationError):
        return "; ".join(problems(exc, prefix))
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{prefix}: {text}" if prefix else text
