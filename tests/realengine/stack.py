"""One stack of this repository's program, driven through the built `pulumi` CLI as a user drives it.

Its commands run in the project directory given (the checkout for `make demo`, a copy for the
tests), with the environment of tests/realtools.py (offline; a file backend; checkpoints
skipped, as the program's own tooling does). Secrets only ever travel on stdin.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from tests import realtools

NAMESPACE = "numa-kubelets"


class PulumiFailed(AssertionError):
    def __init__(self, args: tuple[str, ...], result: subprocess.CompletedProcess[str]) -> None:
        self.args_, self.result = args, result
        super().__init__(f"pulumi {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")


@dataclass
class EngineStack:
    project: Path
    name: str
    env: dict[str, str]

    @property
    def stack_file(self) -> Path:
        return self.project / f"Pulumi.{self.name}.yaml"

    def run(
        self, *args: str, stdin: str = "", check: bool = True, echo: TextIO | None = None, timeout: float = 1800
    ) -> subprocess.CompletedProcess[str]:
        """`pulumi <args> --stack <name>`; with `echo`, its output is copied there as it comes (the
        demo shows the update as it runs). Raises PulumiFailed on a non-zero exit when `check`."""
        argv = [str(realtools.TOOLS_BIN / "pulumi"), "--non-interactive", *args, "--stack", self.name]
        started = time.monotonic()
        if echo is None:
            result = subprocess.run(
                argv, cwd=self.project, env=self.env, input=stdin, capture_output=True, text=True, timeout=timeout
            )
        else:
            result = _tee(argv, self.project, self.env, stdin, echo, timeout)
        self.last_seconds = time.monotonic() - started
        if check and result.returncode != 0:
            raise PulumiFailed(args, result)
        return result

    def init(self, config: dict[str, Any], secrets: dict[str, str]) -> None:
        """`pulumi stack init`, the plain config written into the stack file (as a user edits it;
        nested values need no `--path`), each secret set with `pulumi config set --secret` from stdin."""
        argv = [str(realtools.TOOLS_BIN / "pulumi"), "--non-interactive", "stack", "init", self.name]
        result = subprocess.run(argv, cwd=self.project, env=self.env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise PulumiFailed(("stack", "init", self.name), result)
        self.set_config(config)
        for key, value in secrets.items():
            self.run("config", "set", "--secret", f"{NAMESPACE}:{key}", stdin=value)

    def set_config(self, config: dict[str, Any]) -> None:
        """Replace the stack file's plain config, keeping what the CLI wrote (the passphrase's salt,
        the secrets)."""
        document = yaml.safe_load(self.stack_file.read_text()) or {}
        kept = {key: value for key, value in (document.get("config") or {}).items() if _is_secret(value)}
        document["config"] = {**{f"{NAMESPACE}:{key}": value for key, value in config.items()}, **kept}
        temporary = self.stack_file.with_name(f".{self.stack_file.name}.tmp")
        temporary.write_text(yaml.safe_dump(document, sort_keys=False))
        temporary.replace(self.stack_file)

    def outputs(self) -> dict[str, Any]:
        return dict(json.loads(self.run("stack", "output", "--json").stdout))

    def export(self) -> str:
        return self.run("stack", "export").stdout


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"}


def _tee(
    argv: list[str], cwd: Path, env: dict[str, str], stdin: str, echo: TextIO, timeout: float
) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(stdin)
    process.stdin.close()
    deadline = time.monotonic() + timeout
    lines = []
    for line in process.stdout:
        lines.append(line)
        echo.write(line)
        echo.flush()
        if time.monotonic() > deadline:
            process.kill()
            break
    code = process.wait()
    return subprocess.CompletedProcess(argv, code, "".join(lines), "")


def engine_env(state_dir: Path, passphrase_file: Path | None = None) -> dict[str, str]:
    """tests/realtools.py's environment; with `passphrase_file`, the secrets' passphrase is read from
    it (the demo's, which a user's shell then uses too) instead of the tests' fixed one."""
    env = realtools.pulumi_env(state_dir)
    if passphrase_file is not None:
        del env["PULUMI_CONFIG_PASSPHRASE"]
        env["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(passphrase_file)
    # `--event-log` (the engine's own record of each step, as the Automation API reads it) is
    # offered only with the CLI's debug commands on.
    env["PULUMI_DEBUG_COMMANDS"] = "true"
    return env
