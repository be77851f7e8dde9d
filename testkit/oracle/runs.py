"""What every oracle's run shares (the NUMA oracle here, the DRA oracle in ``testkit.oracle_dra``):
the options that choose its cases, its exit status and its last line, which ``make`` and the
tests read, written once.

The line before the last (the oracle's own tally) and the ``--out`` JSON are each oracle's;
``finish`` prints and writes them in the order both keep.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

EXIT_AGREED = 0
EXIT_UNDOCUMENTED = 1
EXIT_FAILED = 2


def case_arguments(parser: argparse.ArgumentParser, cases: int, out: str) -> None:
    """``--cases``, ``--seed``, ``--first``, ``--out`` and ``-v``: which cases, and what is said of them."""
    parser.add_argument("--cases", type=int, default=cases, help=f"how many cases (default {cases})")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    parser.add_argument("--first", type=int, default=0, help="number of the first case (to replay a few)")
    parser.add_argument("--out", type=Path, help=f"write {out} here (JSON)")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line for every case, not only failing ones")


Match = TypeVar("Match", bound=Callable[..., bool])


@dataclass(frozen=True)
class Known(Generic[Match]):
    """A documented disagreement (an entry of docs/oracle.md) and how to recognise it."""

    id: str
    title: str
    matches: Match


class Found(Protocol):
    @property
    def documented(self) -> str:
        """The documented disagreement it is; empty when none explains it."""
        ...


def summary(oracle: str, cases: int, disagreements: Sequence[Found]) -> str:
    """The run's last line, exactly so: ``<oracle>: N cases, D undocumented disagreements``."""
    undocumented = sum(1 for d in disagreements if not d.documented)
    return f"{oracle}: {cases} cases, {undocumented} undocumented disagreements"


def exit_status(outcomes: Iterable[str], disagreements: Sequence[Found]) -> int:
    """2 when a case could not run (outcome ``error``), else 1 when a disagreement is
    undocumented, else 0; a case not judged changes nothing."""
    if any(outcome == "error" for outcome in outcomes):
        return EXIT_FAILED
    return EXIT_UNDOCUMENTED if any(not d.documented for d in disagreements) else EXIT_AGREED


def finish(tally: str, last: str, out: Path | None, document: Callable[[], dict[str, Any]]) -> None:
    """Print the tally, write ``--out`` when asked, print the last line (last of all)."""
    print(tally)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document(), indent=1, default=str) + "\n")
    print(last)
