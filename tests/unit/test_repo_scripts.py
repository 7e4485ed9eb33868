"""shellcheck of the repository's own shell scripts (.ci/run, tools/, the test host's), as
test_scripts.py does for the scripts the program generates: a finding fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_scripts import tool

REPO = Path(__file__).resolve().parents[2]
# What is not the repository's: environments, built programs, caches, state.
NOT_SOURCES = {".git", ".venv", ".tools", ".testhost", ".demo", ".pytest_cache", ".hypothesis", "plan-out"}
# Scripts without a `#!` line and the shell that runs them (shellcheck cannot tell).
SHELL_OF_SCRIPTS_WITHOUT_SHEBANG = {
    "tools/pulumi-env.sh": "bash",  # sourced by the user's (or a test's) bash
    "tests/testhost/guest_forward.sh": "sh",  # qemu runs it as `/bin/sh guest_forward.sh`
}
SHELLS = ("sh", "bash", "dash")


def shell_of(path: Path) -> str | None:
    """The shell a file is a script of, from its `#!` line; None for a file that is no script."""
    with open(path, "rb") as handle:
        first = handle.readline(200)
    if first.startswith(b"#!"):
        words = first[2:].decode(errors="replace").split()
        name = Path(words[1] if words and words[0].endswith("/env") and len(words) > 1 else words[0]).name
        return name if name in SHELLS else None
    relative = path.relative_to(REPO).as_posix()
    if path.suffix == ".sh":
        assert relative in SHELL_OF_SCRIPTS_WITHOUT_SHEBANG, f"{relative}: add a #! line (or name its shell above)"
        return SHELL_OF_SCRIPTS_WITHOUT_SHEBANG[relative]
    return None


def repository_scripts() -> list[tuple[str, str]]:
    scripts = []
    for directory, subdirectories, files in os.walk(REPO):
        subdirectories[:] = sorted(name for name in subdirectories if name not in NOT_SOURCES and name != "__pycache__")
        for name in sorted(files):
            path = Path(directory, name)
            if path.is_file() and not path.is_symlink() and (shell := shell_of(path)):
                scripts.append((path.relative_to(REPO).as_posix(), shell))
    return scripts


SCRIPTS = repository_scripts()


def test_the_scripts_found_include_the_entry_points():
    found = {name for name, _ in SCRIPTS}
    assert {".ci/run", "tools/prerequisites.sh", "tools/build.sh", "tests/run.sh"} <= found


@pytest.mark.parametrize(("script", "shell"), SCRIPTS, ids=[name for name, _ in SCRIPTS])
def test_repository_script_passes_shellcheck(script, shell):
    result = subprocess.run(
        [tool("shellcheck"), f"--shell={shell}", "--severity=warning", "--format=gcc", script],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
