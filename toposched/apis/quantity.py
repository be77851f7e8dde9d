"""Kubernetes resource quantities.

Values keep the spelling the user wrote (``"100Mi"`` stays ``"100Mi"``) so objects round-trip;
the numeric value is exact (a Decimal), by the apiserver's rules: a number, then one binary
suffix (Ki..Ei), one decimal suffix (n, u, m, k, M..E) or a decimal exponent.

The official client library's parser gives the same values (the test vectors in
tests/unit/apis/test_models.py came from it), but that package is not a dependency: Kopf imports
it when it is installed, and with it the whole generated client (about 50 MiB in every operator).
"""

import functools
import re
from collections.abc import Callable
from decimal import ROUND_UP, Decimal
from typing import Annotated, TypeAlias

from pydantic import AfterValidator, PlainValidator

from toposched.apis.limits import MAX_BANDWIDTH, MAX_QUANTITY, MAX_QUANTITY_TEXT, show_limit

_MULTIPLIERS: dict[str, Decimal] = {
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Decimal(1000) ** (i - 3) for i, s in enumerate("num")},
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate("kMGTPE")},
}


def _parse_quantity(value: str | int | Decimal) -> Decimal:
    """The exact value of a quantity already known to be well formed (``_SYNTAX``)."""
    if not isinstance(value, str):
        return Decimal(value)
    for length in (2, 1):  # "1Ei" is exbibytes, "1E" exabytes, "1E3" a thousand
        multiplier = _MULTIPLIERS.get(value[-length:]) if len(value) > length else None
        if multiplier is not None:
            return Decimal(value[:-length]) * multiplier
    return Decimal(value)


_SYNTAX = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?")
"""The apiserver's quantity syntax (the CRDs' pattern): ASCII digits, one suffix or exponent, no blanks."""
NANO = Decimal("1e-9")
HINT = "e.g. 100Mi, 1G, 1500m, 10e3"


def parse_quantity(value: object) -> Decimal:
    """Return the exact value of a quantity such as ``"1500m"`` (1.5) or ``"1Gi"``.

    Raises ValueError with the offending text when it is not a Kubernetes quantity, or when its
    magnitude is beyond anything a machine has (``limits.MAX_QUANTITY``): no caller then meets an
    exponent of a million. Per-resource bounds are ``limits.check_amount``'s.
    """
    if isinstance(value, str | int) and not isinstance(value, bool):  # the same few spellings recur
        return _parse_cached(value)
    return _parse(value)


@functools.lru_cache(maxsize=4096)
def _parse_cached(value: str | int) -> Decimal:
    return _parse(value)  # Decimals are immutable: sharing one is safe


def _parse(value: object) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise ValueError(f"expected a quantity (a string or a number), not {type(value).__name__}")
    shown = _shown(value)
    if isinstance(value, str) and (len(value) > MAX_QUANTITY_TEXT or not _SYNTAX.fullmatch(value)):
        raise ValueError(f"{shown} is not a Kubernetes quantity ({HINT})")
    if isinstance(value, float):
        value = Decimal(repr(value))  # 0.1 from a YAML file means 0.1, not the nearest binary fraction
    try:
        number = Decimal(_parse_quantity(value))
    except ArithmeticError:  # an exponent beyond what decimal arithmetic holds
        raise ValueError(f"{shown} is more than any machine has (at most {show_limit(MAX_QUANTITY)})") from None
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{shown} is not a Kubernetes quantity ({HINT})") from exc
    if not number.is_finite():
        raise ValueError(f"{shown} is not a Kubernetes quantity ({HINT})")
    if number.copy_abs() > MAX_QUANTITY:  # copy_abs: no context, so no Overflow at any exponent
        raise ValueError(f"{shown} is more than any machine has (at most {show_limit(MAX_QUANTITY)})")
    if number.as_tuple().exponent < -9:  # type: ignore[operator]  # finite: an int
        number = number.quantize(NANO, rounding=ROUND_UP)  # as the apiserver does: nothing finer than 1n
    return number


def _shown(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 128:  # repr of a huge int is slow, or refused
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 64 else f"{text[:59]}...{text[-1]}"


def _check(value: object) -> str | int:
    """The value as written (a float from a YAML file becomes an int or a string), once it parses."""
    parse_quantity(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() else str(value)
    if isinstance(value, Decimal):
        return str(value)
    assert isinstance(value, str | int)
    return value


Quantity: TypeAlias = Annotated[str | int, PlainValidator(_check)]
"""A quantity as written in the object (string or integer), checked to parse and to be within
``limits.MAX_QUANTITY``; one readable error whatever the type (not one per union member)."""


def _non_negative(limit: int, what: str) -> Callable[[str | int], str | int]:
    def check(value: str | int) -> str | int:
        number = parse_quantity(value)
        if number < 0:
            raise ValueError(f"{_shown(value)} is negative")
        if number > limit:
            raise ValueError(f"{_shown(value)} is more than {what} (at most {show_limit(limit)})")
        return value

    return check


Bandwidth: TypeAlias = Annotated[Quantity, AfterValidator(_non_negative(MAX_BANDWIDTH, "any link carries"))]
"""Bits per second between two pods or of one node: 0 to ``limits.MAX_BANDWIDTH``."""
TotalBandwidth: TypeAlias = Annotated[Quantity, AfterValidator(_non_negative(MAX_QUANTITY, "any network carries"))]
"""Bits per second summed over a zone or region: 0 to ``limits.MAX_QUANTITY``."""
