"""The core's KubeletConfiguration schema against the real one: `kubelet-schema` (built by
`make tools` from tools/kubernetes/kubeletschema, the Kubernetes release the real-kubelet tests
run) prints every field of `k8s.io/kubelet/config/v1beta1` with its type, read from the Go types
by reflection. A release that adds, removes or retypes a field fails here until the core's copy
(numa_kubelets/kubelet_config.py KUBELET_FIELDS) follows."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from numa_kubelets import feature_gates as fg
from numa_kubelets import kubelet_config as kc
from tests.realcluster.controlplane import tool

pytestmark = pytest.mark.realtools("kubelet")  # kubelet-schema: built by tools/build.sh

# component-base's logging `options` hold one object per registered log format (json, text):
# the core leaves them open (MapOf(ANY)) and lets the kubelet judge them.
OPEN_IN_THE_CORE = {("logging", "options")}


def as_json(field_type: kc.FieldType) -> Any:
    """A core field type in kubelet-schema's notation."""
    if isinstance(field_type, str):
        return field_type
    if isinstance(field_type, kc.ListOf):
        return {"list": as_json(field_type.item)}
    if isinstance(field_type, kc.MapOf):
        return {"map": as_json(field_type.value)}
    return {"object": {name: as_json(value) for name, value in field_type.fields.items()}}


def differences(core: dict[str, Any], real: dict[str, Any], path: tuple[str, ...] = ()) -> list[str]:
    found = []
    for name in sorted(set(core) | set(real)):
        where = ".".join((*path, name))
        if (*path, name) in OPEN_IN_THE_CORE:
            continue
        if name not in real:
            found.append(f"{where}: in the core, not in the real KubeletConfiguration")
        elif name not in core:
            found.append(f"{where}: in the real KubeletConfiguration ({real[name]}), not in the core")
        elif isinstance(core[name], dict) and isinstance(real[name], dict) and "object" in core[name]:
            if "object" not in real[name]:
                found.append(f"{where}: the core says {core[name]}, the kubelet {real[name]}")
            else:
                found += differences(core[name]["object"], real[name]["object"], (*path, name))
        elif core[name] != real[name]:
            found.append(f"{where}: the core says {core[name]}, the kubelet {real[name]}")
    return found


def real_schema() -> dict[str, Any]:
    result = subprocess.run([tool("kubelet-schema")], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_the_cores_kubelet_configuration_schema_is_the_real_kubelets():
    core = {name: as_json(field_type) for name, field_type in kc.KUBELET_FIELDS.items()}
    assert differences(core, real_schema()) == []


def test_the_schema_is_of_the_kubelet_the_tests_run():
    version = subprocess.run([tool("kubelet"), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.strip().startswith(f"Kubernetes v{kc.SCHEMA_KUBELET_VERSION}.")
    assert kc.SUPPORTED_KUBELET_VERSIONS[-1] == kc.SCHEMA_KUBELET_VERSION


def test_the_comparison_finds_a_field_the_kubelet_does_not_know():
    core = {name: as_json(field_type) for name, field_type in kc.KUBELET_FIELDS.items()}
    core["draManagerReconcilePeriod"] = "duration"  # in 1.35's types, gone in 1.37
    core["authentication"] = {"object": {**core["authentication"]["object"], "x509": "string"}}
    assert differences(core, real_schema()) == [
        "authentication.x509: the core says string, the kubelet {'object': {'clientCAFile': 'string'}}",
        "draManagerReconcilePeriod: in the core, not in the real KubeletConfiguration",
    ]


# A value of each core type that the kubelet's decoder takes: "1" is a string and a quantity,
# 1 a number of nanoseconds (logging.flushFrequency) and a quantity (infoBufferSize).
SAMPLES = {kc.BOOL: True, kc.INT: 1, kc.FLOAT: 0.5, kc.STR: "1", kc.DURATION: "1m0s", kc.ANY: 1}


# Strings the kubelet parses further. A metav1.Time, which the core's vocabulary calls a string:
# the kubelet refuses anything but RFC 3339 (the key is the program's own, refused in
# kubeletConfig). Feature gate names: the kubelet panics on one it does not know while it
# sets its defaults (the core refuses those too: the tests at the end).
TIMESTAMP = "2026-01-01T00:00:00Z"


def a_feature_gate_of_the_kubelet() -> str:
    """The first gate `kubelet --help` lists (`  Name=true|false (STAGE - default=...)`)."""
    help_text = subprocess.run([tool("kubelet"), "--help"], capture_output=True, text=True).stdout
    found = re.search(r"^\s+([A-Za-z0-9]+)=true\|false \(", help_text, re.MULTILINE)
    assert found, "kubelet --help lists no feature gates"
    return found.group(1)


def sample_of(field_type: kc.FieldType, path: tuple[str, ...] = ()) -> Any:
    if path == ("registerWithTaints", "timeAdded"):
        return TIMESTAMP
    if path == ("featureGates",):
        return {a_feature_gate_of_the_kubelet(): True}
    if isinstance(field_type, str):
        return SAMPLES[field_type]
    if isinstance(field_type, kc.ListOf):
        return [sample_of(field_type.item, path)]
    if isinstance(field_type, kc.MapOf):
        return {"1": sample_of(field_type.value, path)}
    return {
        name: sample_of(value, (*path, name))
        for name, value in field_type.fields.items()
        if (*path, name) not in OPEN_IN_THE_CORE
    }


def leaf_paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in leaf_paths(item, (*path, key))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in leaf_paths(item, (*path, index))]
    return [path]


def lookup(document: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


def decoded_by_the_kubelet(document: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    text = json.dumps({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", **document})
    return subprocess.run([tool("kubelet-schema"), "decode"], input=text, capture_output=True, text=True)


def test_every_field_of_the_core_with_a_sample_value_is_read_by_the_kubelets_strict_decoder():
    """One file with every field the core knows set: the kubelet's own codecs decode it strictly
    (no unknown field, no value of the wrong type) and every value comes back out of what the
    kubelet read (none dropped on the way to its internal configuration)."""
    document = sample_of(kc.Obj(kc.KUBELET_FIELDS))
    result = decoded_by_the_kubelet(document)
    assert result.returncode == 0, result.stderr
    read = yaml.safe_load(result.stdout)
    missing = []
    for path in leaf_paths(document):
        try:
            lookup(read, path)
        except (KeyError, IndexError, TypeError):
            missing.append(".".join(map(str, path)))
    assert missing == [], f"set in the file, not in what the kubelet read: {missing}"
    assert len(leaf_paths(document)) > 100  # every field, nested ones included


def test_the_kubelets_strict_decoder_refuses_an_unknown_field_and_a_wrong_type():
    unknown = decoded_by_the_kubelet({"podLogDirectory": "/var/log/pods"})
    assert unknown.returncode != 0 and 'unknown field "podLogDirectory"' in unknown.stderr
    mistyped = decoded_by_the_kubelet({"maxPods": "ten"})
    assert mistyped.returncode != 0 and "maxPods" in mistyped.stderr, mistyped.stderr


def test_the_cores_feature_gate_table_is_the_kubelets():
    """`kubelet-schema feature-gates`: the gates the kubelet's feature gate holds (every package
    the kubelet links registers its own), with their versioned specs and dependencies. The core
    judges `featureGates` with its copy (numa_kubelets/kubelet_feature_gates.json): refresh it
    with `kubelet-schema feature-gates > numa_kubelets/kubelet_feature_gates.json`."""
    result = subprocess.run([tool("kubelet-schema"), "feature-gates"], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == json.loads(fg.TABLE_PATH.read_text())


def test_the_gates_kubelet_help_lists_are_in_the_table_with_their_stage_and_default():
    """The table against the kubelet binary itself: `--help` lists each gate that is alpha or beta
    at its version as `Name=true|false (STAGE - default=...)`."""
    help_text = subprocess.run([tool("kubelet"), "--help"], capture_output=True, text=True).stdout
    listed = re.findall(r"^\s+([A-Za-z0-9]+)=true\|false \(([A-Z]+) - default=(true|false)\)", help_text, re.M)
    assert len(listed) > 20, help_text[-2000:]
    table = fg.kubelet_table()
    wrong = []
    for name, stage, default in listed:
        spec = fg.spec_at(table.gates[name], table.release) if name in table.gates else None
        if spec is None or (spec.stage, spec.default) != (stage, default == "true"):
            wrong.append(f"{name}: --help says {stage} default={default}, the table {spec}")
    assert wrong == []


def some_gate(table: fg.GateTable, wanted: Callable[[fg.Spec], bool]) -> str:
    for name, specs in sorted(table.gates.items()):
        spec = fg.spec_at(specs, table.release)
        if name not in (fg.ALL_ALPHA, fg.ALL_BETA) and spec is not None and wanted(spec):
            return name
    raise AssertionError("the table has no such gate")


def test_the_core_refuses_exactly_the_gate_maps_the_kubelet_panics_on():
    """Each map through the core and through the kubelet's own defaulting (`kubelet-schema
    decode`, where the kubelet panics on a map its feature gate refuses)."""
    table = fg.kubelet_table()
    version = fg._text(table.release)
    locked = some_gate(table, lambda s: s.locked)
    beta = some_gate(table, lambda s: s.stage == "BETA" and not s.locked)
    alpha = some_gate(table, lambda s: s.stage == "ALPHA")
    maps = [
        {beta: not fg.spec_at(table.gates[beta], table.release).default},
        {alpha: True},
        {fg.ALL_ALPHA: True},
        {locked: fg.spec_at(table.gates[locked], table.release).default},
        {locked: not fg.spec_at(table.gates[locked], table.release).default},
        {"NoSuchFeatureGate": True},
    ]
    for dependent, needs in sorted(table.dependencies.items()):
        if not fg.spec_at(table.gates[dependent], table.release).locked:
            maps.append({dependent: True, **dict.fromkeys(needs, False)})
            break
    verdicts = []
    for gates in maps:
        core = fg.gate_problems(gates, "featureGates", version) + fg.dependency_problems(gates, "featureGates", version)
        kubelet = decoded_by_the_kubelet({"featureGates": gates})
        verdicts.append((gates, bool(core), kubelet.returncode != 0))
        if kubelet.returncode != 0:
            assert "failed to merge global and in-flight KubeletConfiguration" in kubelet.stderr, kubelet.stderr
            # The same gates named: the one refused, or each enabled gate missing a dependency.
            for problem in core:
                named = (
                    problem.path.rsplit(".", 1)[-1] if problem.path != "featureGates" else problem.message.split()[0]
                )
                assert named in kubelet.stderr, (problem, kubelet.stderr)
    assert [(gates, core) for gates, core, _ in verdicts] == [(gates, kubelet) for gates, _, kubelet in verdicts]
    # AllAlpha alone is refused: it enables alpha gates whose (beta, default-off) dependencies
    # it leaves off (1.37: CompositePodGroup and others need GenericWorkload).
    assert [refused for _, refused, _ in verdicts][:6] == [False, False, True, False, True, True]
