"""A configuration problem with the path of the offending value, and the error that lists them all."""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE = "numa-kubelets"
MISSING_KEY = "required key is missing"


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(ValueError):
    """The configuration is invalid; `problems` lists every finding."""

    def __init__(self, problems: list[Problem]) -> None:
        # Once each: a problem of a shared layer is found for every kubelet that inherits it.
        self.problems = sorted(set(problems), key=lambda p: (p.path, p.message))
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid {NAMESPACE} configuration ({len(self.problems)} problem(s)):\n{lines}")
