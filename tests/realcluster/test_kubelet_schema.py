"""The core's KubeletConfiguration schema against the real one: `kubelet-schema` (built by
`make tools` from tools/kubernetes/kubeletschema, the Kubernetes release the real-kubelet tests
run) prints every field of `k8s.io/kubelet/config/v1beta1` with its type, read from the Go types
by reflection. A release that adds, removes or retypes a field fails here until the core's copy
(numa_kubelets/kubelet_config.py KUBELET_FIELDS) follows."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from numa_kubelets import kubelet_config as kc
from tests.realcluster.controlplane import tool

pytestmark = pytest.mark.realtools("kubernetes")  # kubelet-schema: built by tools/build.sh

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
