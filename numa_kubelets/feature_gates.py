"""Which `featureGates` maps the kubelet accepts: its own feature gate's rules, from its own data.

The kubelet sets its configuration's defaults through its feature gate and panics when the map
is refused (k8s.io/kubernetes pkg/kubelet/apis/config/v1beta1/defaults.go), so a refused map
means a kubelet that never starts. The rules are component-base's `featuregate.SetFromMap`: an
unknown name, a gate locked to its default set the other way, a gate not yet released (pre-alpha)
at the kubelet's version, and an enabled gate whose dependencies are disabled.

`kubelet_feature_gates.json` is what `kubelet-schema feature-gates` printed for the newest
supported release (tests/realcluster/test_kubelet_schema.py fails when the built one differs):
every gate with its versioned specs, and the dependencies. A kubelet of release R evaluates its
gates at its own version with the specs it carries for R-3 to R (the versions it can emulate),
so those are the versions checked; a gate the table does not know is an error for R only (an
older kubelet may still have one that R removed); dependencies as R declares them, for R only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .problems import Problem

TABLE_PATH = Path(__file__).with_name("kubelet_feature_gates.json")
# The release's own specs describe this many minor versions before it (emulation versions).
EMULATED_MINORS = 3
# component-base's special gates: they set every unset gate of their stage.
ALL_ALPHA, ALL_BETA = "AllAlpha", "AllBeta"
PRE_ALPHA = "PRE-ALPHA"


@dataclass(frozen=True)
class Spec:
    """One stage of a gate, valid from `version` on."""

    version: tuple[int, int]
    default: bool
    locked: bool
    stage: str  # ALPHA, BETA, "" (GA), DEPRECATED, PRE-ALPHA
    min_compatibility: tuple[int, int] | None


@dataclass(frozen=True)
class GateTable:
    release: tuple[int, int]
    gates: Mapping[str, tuple[Spec, ...]]
    dependencies: Mapping[str, tuple[str, ...]]


def _minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def parse_table(document: Mapping[str, Any]) -> GateTable:
    gates = {
        name: tuple(
            sorted(
                (
                    Spec(
                        version=_minor(spec["version"]),
                        default=spec["default"],
                        locked=spec.get("lockToDefault", False),
                        stage=spec["preRelease"],
                        min_compatibility=_minor(spec["minCompatibilityVersion"])
                        if spec.get("minCompatibilityVersion")
                        else None,
                    )
                    for spec in specs
                ),
                key=lambda s: s.version,
            )
        )
        for name, specs in document["gates"].items()
    }
    dependencies = {name: tuple(needs) for name, needs in document["dependencies"].items()}
    return GateTable(_minor(document["release"]), gates, dependencies)


@functools.cache
def kubelet_table() -> GateTable:
    return parse_table(json.loads(TABLE_PATH.read_text()))


def spec_at(specs: tuple[Spec, ...], version: tuple[int, int]) -> Spec | None:
    """featureSpecAtEmulationAndMinCompatVersion: the newest spec not after `version` whose
    minimum compatibility version the kubelet meets (its own minus one minor); None: pre-alpha."""
    min_compatibility = (version[0], version[1] - 1)
    for spec in reversed(specs):
        if spec.version > version:
            continue
        if spec.min_compatibility is not None and min_compatibility < spec.min_compatibility:
            continue
        return spec
    return None


def _text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def checked(version: str, table: GateTable) -> bool:
    """Whether the table describes kubelet `version`'s gates (see the module docstring)."""
    declared = _minor(version)
    return (table.release[0], table.release[1] - EMULATED_MINORS) <= declared <= table.release


def gate_problems(gates: Mapping[str, bool], path: str, version: str, table: GateTable | None = None) -> list[Problem]:
    """Each gate of one `featureGates` mapping (`path`) against kubelet `version` (kubeletVersion)."""
    table = table or kubelet_table()
    if not checked(version, table):
        return []
    declared = _minor(version)
    problems = []
    for name, value in gates.items():
        where = f"{path}.{name}"
        specs = table.gates.get(name)
        if specs is None:
            if declared == table.release:
                problems.append(
                    Problem(where, f"kubelet {version} (kubeletVersion) has no such feature gate; it would not start")
                )
            continue
        spec = spec_at(specs, declared)
        if spec is None or spec.stage == PRE_ALPHA:
            first = next((s for s in specs if s.stage != PRE_ALPHA), None)
            since = f" (it appears in {_text(first.version)})" if first is not None else ""
            problems.append(Problem(where, f"kubelet {version} (kubeletVersion) has no such feature gate yet{since}"))
        elif spec.locked and value != spec.default:
            stage = spec.stage or "GA"
            problems.append(
                Problem(
                    where,
                    f"locked to {str(spec.default).lower()} in kubelet {version} ({stage}); "
                    "the kubelet refuses to set it otherwise",
                )
            )
    return problems


def dependency_problems(
    gates: Mapping[str, bool], path: str, version: str, table: GateTable | None = None
) -> list[Problem]:
    """The merged `featureGates` of one kubelet: every enabled gate's dependencies enabled too."""
    table = table or kubelet_table()
    declared = _minor(version)
    if declared != table.release or any(name not in table.gates for name in gates):
        return []
    enabled = effective_gates(gates, declared, table)
    problems = []
    for name, needs in sorted(table.dependencies.items()):
        disabled = [need for need in needs if not enabled.get(need, False)]
        if enabled.get(name, False) and disabled:
            problems.append(
                Problem(
                    path,
                    f"{name} is enabled in kubelet {version}, but it needs {', '.join(disabled)}, "
                    "which this configuration leaves disabled",
                )
            )
    return problems


def effective_gates(gates: Mapping[str, bool], version: tuple[int, int], table: GateTable) -> dict[str, bool]:
    """Every gate's value in a kubelet given `gates`: set ones, then AllAlpha/AllBeta, then defaults."""
    enabled = dict(gates)
    for special, stage in ((ALL_ALPHA, "ALPHA"), (ALL_BETA, "BETA")):
        if special in gates:
            for name, specs in table.gates.items():
                spec = spec_at(specs, version)
                if name not in (ALL_ALPHA, ALL_BETA) and spec is not None and spec.stage == stage:
                    enabled.setdefault(name, gates[special])
    for name, specs in table.gates.items():
        spec = spec_at(specs, version)
        enabled.setdefault(name, spec.default if spec is not None else False)
    return enabled
