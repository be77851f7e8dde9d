"""Every command against bounded random mutations of real inputs: no traceback, no hang, every
error one ``toposched CMD:`` line. A few hundred cases each here; ``hack/fuzz.sh`` runs a long
campaign (``TOPOSCHED_FUZZ_CASES`` raises the count here too)."""

import os

import pytest

from testkit.fuzz import COMMANDS, campaign

CASES = int(os.environ.get("TOPOSCHED_FUZZ_CASES", "150"))


@pytest.mark.parametrize("command", COMMANDS)
def test_mutated_inputs_never_crash_or_hang_a_command(command: str) -> None:
    report = campaign(command, CASES, seed=int(os.environ.get("TOPOSCHED_FUZZ_SEED", "0")), timeout=20)
    assert report.findings == {}, report.summary()
    assert report.cases == CASES
    assert report.exits[1] > 0  # the mutations do reach the error paths
