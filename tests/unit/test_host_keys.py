"""Host keys are pinned by default: every host has its own `hostKey`, unless the stack opts out."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from numa_kubelets import review
from numa_kubelets.config import ConfigError, load_config, load_stack_values
from tests.unit.builders import HOST_KEY, origin_config, origin_host

PROJECT_DIR = Path(__file__).resolve().parents[2]


def unpinned_fleet() -> dict:
    """Three pinned hosts; the tests take keys away."""
    return origin_config(
        hosts=[
            origin_host(),
            origin_host(name="numa-b", address="192.0.2.11"),
            origin_host(name="numa-c", address="numa-c.example.internal", sshPort=2222),
        ]
    )


def without_keys(raw: dict, *indexes: int) -> dict:
    for index in indexes:
        raw["hosts"][index].pop("hostKey")
    return raw


def test_unpinned_hosts_are_one_problem_naming_every_one_and_how_to_get_the_key():
    raw = without_keys(unpinned_fleet(), 1, 2)
    with pytest.raises(ConfigError) as error:
        load_config(raw)
    [problem] = error.value.problems
    assert problem.path == "hosts"
    assert "no hostKey pinned for 2 host(s): numa-b (hosts[1]), numa-c (hosts[2])" in problem.message
    assert "`ssh-keyscan -t ed25519 192.0.2.11` prints it" in problem.message
    assert "insecureSkipHostKeyCheck: true" in problem.message


def test_the_keyscan_hint_carries_the_ssh_port():
    raw = without_keys(unpinned_fleet(), 2)
    with pytest.raises(ConfigError, match=r"ssh-keyscan -t ed25519 -p 2222 numa-c\.example\.internal"):
        load_config(raw)


def test_the_opt_out_accepts_unpinned_hosts_and_keeps_the_keys_given():
    raw = without_keys(unpinned_fleet(), 1)
    raw["insecureSkipHostKeyCheck"] = True
    config = load_config(raw)
    assert [host.host_key for host in config.hosts] == [HOST_KEY, None, HOST_KEY]


def test_the_opt_out_arrives_from_pulumi_as_a_string():
    values = {"hosts": '[{"name": "a", "address": "192.0.2.1", "numaNodes": [{"id": 0, "cpus": "0-3"}]}]'}
    with pytest.raises(ConfigError, match="no hostKey pinned"):
        load_stack_values(values, ())
    config = load_stack_values({**values, "insecureSkipHostKeyCheck": "true"}, ())
    assert config.insecure_skip_host_key_check


def test_a_host_key_inherited_from_a_class_is_refused():
    raw = origin_config(
        hosts=[{"name": "h", "address": "192.0.2.1", "class": "c"}],
        hostClasses={"c": {"numaNodes": [{"id": 0, "cpus": "0-3"}], "hostKey": HOST_KEY}},
    )
    with pytest.raises(ConfigError) as error:
        load_config(raw)
    assert [str(p).split(":")[0] for p in error.value.problems] == ["hostClasses.c.hostKey", "hosts"]


def test_the_plan_comment_says_not_pinned_only_with_the_opt_out():
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.example-cluster.yaml").read_text())
    assert "not pinned" not in review.render_stack(document)[review.SUMMARY]
    del document["config"]["numa-kubelets:hosts"][1]["hostKey"]
    with pytest.raises(ConfigError, match=r"no hostKey pinned for 1 host\(s\): numa-b \(hosts\[1\]\)"):
        review.render_stack(document)
    document["config"]["numa-kubelets:insecureSkipHostKeyCheck"] = True
    files = review.render_stack(document)
    assert "- SSH host keys: not pinned for numa-b (insecureSkipHostKeyCheck: true)" in files[review.SUMMARY]
    assert "- host key: not pinned" in files["numa-b/index.md"]
    assert "- host key: pinned" in files["numa-a/index.md"]


def test_every_stack_file_of_the_repository_validates():
    for stack_file in sorted(PROJECT_DIR.glob("Pulumi.*.yaml")):
        document = yaml.safe_load(stack_file.read_text())
        if "config" in document:
            review.plan_from_stack(document)
