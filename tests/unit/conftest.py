"""Fixtures of the unit tests."""

import os
from collections.abc import Callable, Mapping, Sequence

import pytest

from toposched.cli import build_parser
from toposched.exporter.settings import ExporterSettings
from toposched.netperf.settings import ProberSettings
from toposched.operators.settings import OperatorSettings
from toposched.schedhook.settings import SchedhookSettings
from toposched.settings import Settings

SETTINGS: dict[str, type[Settings]] = {
    "operator": OperatorSettings,
    "exporter": ExporterSettings,
    "netperf": ProberSettings,
    "schedhook": SchedhookSettings,
}
"""Each daemon command and its settings."""
POD_VARIABLES = ("KUBERNETES_SERVICE_HOST", "NODE_NAME", "POD_NAMESPACE")

CommandSettings = Callable[[str, Sequence[str], Mapping[str, str]], Settings]


@pytest.fixture
def command_settings(monkeypatch: pytest.MonkeyPatch) -> CommandSettings:
    """A command's settings as it builds them from its flags and the given environment: what the
    test runs in (a pod's variables, TOPOSCHED_* ones) is left out."""
    for name in [*POD_VARIABLES, *(n for n in os.environ if n.startswith("TOPOSCHED_"))]:
        monkeypatch.delenv(name, raising=False)

    def settings(command: str, argv: Sequence[str], environ: Mapping[str, str]) -> Settings:
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        return SETTINGS[command].from_args(build_parser(command).parse_args([command, *argv]))

    return settings
