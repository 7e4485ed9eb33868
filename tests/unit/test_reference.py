"""The generated reference pages (numa_kubelets.docgen): complete, and current in the repository."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from pydantic import Field

from components.rollout import REVISIONS_OUTPUT
from numa_kubelets.config import HostSpec, StackConfig, load_config
from numa_kubelets.docgen import PICTURED_STACKS, generated_pages, stale_pages
from numa_kubelets.outputs import HOST_KEYS, KUBELET_KEYS, STACK_OUTPUTS, hosts_output
from numa_kubelets.placement import PLACEMENT_KEYS, PlacementVerdict, demo_pods
from numa_kubelets.plan import build_plan
from numa_kubelets.reference import configuration_reference, undescribed_fields
from tests.unit.builders import namespace_host, origin_config, origin_host, plan_of, with_cluster

ROOT = Path(__file__).resolve().parents[2]
NETWORK_KEYS = {"address", "netns"}
DEVICE_KEYS = {"devices", "devicePluginUnits"}


def test_every_configuration_key_has_a_description():
    assert undescribed_fields() == []


def test_a_field_added_without_a_description_stops_the_reference():
    class HostWithANewKey(HostSpec):
        described: int = Field(default=0, description="A key with its description.")
        undescribed: int = 0

    class StackWithANewKey(StackConfig):
        hosts: list[HostWithANewKey] = Field(min_length=1, description="The hosts.")

    assert undescribed_fields(StackWithANewKey) == ["HostWithANewKey.undescribed"]
    with pytest.raises(ValueError, match=r"HostWithANewKey\.undescribed"):
        configuration_reference(StackWithANewKey)


def test_the_committed_pages_are_the_generated_ones():
    assert stale_pages(ROOT) == [], "run: python -m numa_kubelets.docgen"


def test_a_page_edited_by_hand_is_out_of_date(tmp_path):
    for stack_file in PICTURED_STACKS:
        shutil.copy(ROOT / stack_file, tmp_path / stack_file)
    shutil.copytree(ROOT / "docs/reference", tmp_path / "docs/reference")
    page = tmp_path / "docs/reference/configuration.md"
    page.write_text(page.read_text().replace("The host's SSH port.", "The SSH port."))
    assert stale_pages(tmp_path) == [page]


def test_every_key_row_carries_type_default_and_bounds():
    page = generated_pages(ROOT)[ROOT / "docs/reference/configuration.md"]
    assert "| `hosts[].sshPort` | integer |  | `22` | 1 to 65535 | The host's SSH port. |" in page
    assert "| `hosts[].name` | DNS-1123 label | yes |" in page
    assert "| `hosts[].numaNodes[]` | [list of object](#hosts-numanodes) | yes |  | at least 1 item(s) |" in page
    assert '| `hosts[].network.mode` | `host` \\| `namespace` |  | `"host"` |' in page


def exported_names() -> set[str]:
    """The first argument of every `pulumi.export(...)` in __main__.py."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / "__main__.py").read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "pulumi.export":
            first = node.args[0]
            if isinstance(first, ast.Constant):
                names.add(first.value)
            else:
                assert ast.unparse(first) == "REVISIONS_OUTPUT", ast.unparse(first)
                names.add(REVISIONS_OUTPUT)
    return names


def test_every_stack_output_is_described():
    assert exported_names() == set(STACK_OUTPUTS)


def test_the_keys_of_hosts_are_described():
    host_mode = hosts_output(plan_of(origin_config()))["numa-a"]
    assert set(host_mode) == set(HOST_KEYS)
    assert {key for kubelet in host_mode["kubelets"].values() for key in kubelet} == (
        set(KUBELET_KEYS) - NETWORK_KEYS - DEVICE_KEYS
    )
    namespace_mode = hosts_output(plan_of(origin_config(hosts=[namespace_host()])))["numa-a"]
    assert {key for kubelet in namespace_mode["kubelets"].values() for key in kubelet} == (
        set(KUBELET_KEYS) - DEVICE_KEYS
    )
    nvme = {"address": "0000:41:00.0", "class": "0x010802", "vendor": "0x1b36", "device": "0x0010"}
    nodes = [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7", "pciDevices": [nvme]}]
    devices = [{"resource": "example.com/nvme", "select": {"class": "0x0108"}}]
    with_devices = hosts_output(plan_of(origin_config(hosts=[origin_host(numaNodes=nodes)], devices=devices)))
    assert with_devices["numa-a"]["kubelets"]["numa-a-numa1"]["devices"] == {"example.com/nvme": ["0000:41:00.0"]}


def test_the_keys_of_a_placement_entry_are_described():
    config = load_config(with_cluster(origin_config(hosts=[origin_host()], demo={"enabled": True})))
    pod = demo_pods(config, build_plan(config))[0]
    entry = PlacementVerdict(pod=pod, node_name=pod.kubelet.node_name, readings=(), reasons=()).output()
    assert set(entry) == set(PLACEMENT_KEYS)
