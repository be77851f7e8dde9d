"""The README's commands that need no cluster run as written (the cluster ones are what `make
run`, `make cluster` and the integration tests do)."""

import re
import shlex
import subprocess
import sys

import pytest

from testkit.paths import REPO

BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)


def readme_commands() -> list[str]:
    commands = []
    for block in BLOCK.findall((REPO / "README.md").read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split(" #", 1)[0].strip()
            if command.startswith(".venv/bin/toposched "):
                commands.append(command)
    return commands


def test_the_readme_shows_offline_commands() -> None:
    assert len(readme_commands()) >= 3


@pytest.mark.parametrize("command", readme_commands(), ids=lambda c: " ".join(shlex.split(c)[1:3]))
def test_a_readme_command_runs_as_written(command: str) -> None:
    args = shlex.split(command)
    done = subprocess.run(
        [sys.executable, "-m", "toposched", *args[1:]], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
