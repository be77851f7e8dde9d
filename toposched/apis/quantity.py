"""Kubernetes resource quantities.

Values keep the spelling the user wrote (``"100Mi"`` stays ``"100Mi"``) so objects round-trip;
the numeric value comes from the Kubernetes client library's parser, not from a home-made one.
"""

import functools
import importlib.util
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, TypeAlias

from pydantic import AfterValidator


def _load_parser() -> Callable[[Any], Any]:
    """The official client's parser, loaded from its own file.

    ``import kubernetes.utils.quantity`` would run the package's __init__, which imports the
    whole generated client (about 50 MiB resident) for one small function.
    """
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the kubernetes package (for its quantity parser) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "utils" / "quantity.py"
    module_spec = importlib.util.spec_from_file_location("toposched_kubernetes_quantity", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    parser: Callable[[Any], Any] = module.parse_quantity
    return parser


_parse_quantity = _load_parser()


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Return the exact value of a quantity such as ``"1500m"`` (1.5) or ``"1Gi"``.

    Raises ValueError with the offending text when it is not a Kubernetes quantity.
    """
    if isinstance(value, str | int):  # the same few spellings recur in every NRT and pod
        return _parse_cached(value)
    return _parse(value)


@functools.lru_cache(maxsize=4096)
def _parse_cached(value: str | int) -> Decimal:
    return _parse(value)  # Decimals are immutable: sharing one is safe


def _parse(value: str | int | float | Decimal) -> Decimal:
    try:
        return Decimal(_parse_quantity(value))
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 100Mi, 1G, 1500m, 10e3)") from exc


def _check(value: str | int) -> str | int:
    parse_quantity(value)
    return value


Quantity: TypeAlias = Annotated[str | int, AfterValidator(_check)]
"""A quantity as written in the object (string or integer), checked to parse."""
