"""Kubernetes resource quantities.

Values keep the spelling the user wrote (``"100Mi"`` stays ``"100Mi"``) so objects round-trip;
the numeric value comes from the Kubernetes client library's parser, not from a home-made one.
"""

from decimal import Decimal
from typing import Annotated, TypeAlias

from kubernetes.utils.quantity import parse_quantity as _parse_quantity
from pydantic import AfterValidator


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Return the exact value of a quantity such as ``"1500m"`` (1.5) or ``"1Gi"``.

    Raises ValueError with the offending text when it is not a Kubernetes quantity.
    """
    try:
        return Decimal(_parse_quantity(value))
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 100Mi, 1G, 1500m, 10e3)") from exc


def _check(value: str | int) -> str | int:
    parse_quantity(value)
    return value


Quantity: TypeAlias = Annotated[str | int, AfterValidator(_check)]
"""A quantity as written in the object (string or integer), checked to parse."""
