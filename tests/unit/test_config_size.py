"""The stack config's size as the language host passes it in PULUMI_CONFIG (numa_kubelets/config_size.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bench.fleet import fleet_config
from numa_kubelets import review
from numa_kubelets.config import SECRET_KEYS
from numa_kubelets.config_size import MAX_ARG_STRLEN, ConfigSize, go_json, pulumi_config_bytes, stack_config_size


def test_the_variable_is_go_json_of_full_keys_to_strings_objects_as_json():
    config = {
        "hosts": [{"name": "a", "address": "192.0.2.1", "numaNodes": [{"id": 0, "cpus": "0-3"}]}],
        "numa-kubelets:kubeletPath": "/usr/bin/kubelet",
        "kubernetes:context": "c<&>",
        "numa-kubelets:insecureSkipHostKeyCheck": True,
    }
    # What Go's json.Marshal writes: keys sorted, compact, <, > and & escaped, objects as JSON strings.
    expected = (
        "PULUMI_CONFIG="
        '{"kubernetes:context":"c\\u003c\\u0026\\u003e",'
        '"numa-kubelets:hosts":"[{\\"address\\":\\"192.0.2.1\\",\\"name\\":\\"a\\",'
        '\\"numaNodes\\":[{\\"cpus\\":\\"0-3\\",\\"id\\":0}]}]",'
        '"numa-kubelets:insecureSkipHostKeyCheck":"true",'
        '"numa-kubelets:kubeletPath":"/usr/bin/kubelet"}'
    )
    assert pulumi_config_bytes(config) == len(expected) + 1  # the terminating NUL


def test_an_escape_inside_an_object_is_escaped_again_in_the_outer_document():
    assert go_json({"k": go_json({"v": "<"})}) == '{"k":"{\\"v\\":\\"\\\\u003c\\"}"}'


def test_non_ascii_counts_in_utf8_bytes():
    assert pulumi_config_bytes({"x:y": "é"}) - pulumi_config_bytes({"x:y": "e"}) == 1


def test_an_encrypted_value_counts_at_its_ciphertext():
    secure = {"numa-kubelets:kubeconfig": {"secure": "v1:abc:defghij"}}
    assert pulumi_config_bytes(secure) == pulumi_config_bytes({"numa-kubelets:kubeconfig": "v1:abc:defghij"})


@pytest.mark.parametrize(
    ("size", "level"),
    [
        (1_000, "ok"),
        (98_303, "ok"),
        (98_304, "warning"),  # 75 % of 131,072
        (MAX_ARG_STRLEN, "warning"),  # fits, NUL included
        (MAX_ARG_STRLEN + 1, "error"),
    ],
)
def test_levels(size, level):
    assert ConfigSize(size).level == level


def test_the_warning_and_the_error_name_the_limit_and_the_way_out():
    for size in (100_000, 200_000):
        report = ConfigSize(size).report()
        assert "131,072-byte limit" in report and "PULUMI_CONFIG" in report
        assert "hostClasses" in report and "docs/fleets.md#host-classes" in report
    assert (
        ConfigSize(200_000).report().startswith("error: ") and "before the program runs" in ConfigSize(200_000).report()
    )
    assert ConfigSize(100_000).report().startswith("warning: ")
    assert "hostClasses" not in ConfigSize(1_000).report()


def with_class(config: dict) -> dict:
    """The same fleet with its identical hosts written as one class."""
    shared = {key: value for key, value in config["hosts"][0].items() if key not in ("name", "address", "hostKey")}
    hosts = [
        {**{key: host[key] for key in ("name", "address", "hostKey")}, "class": "eight"} for host in config["hosts"]
    ]
    return {**config, "hosts": hosts, "hostClasses": {"eight": shared}}


def stack_file(config: dict) -> dict:
    """The stack file of a config, its secrets encrypted (a stand-in ciphertext as long as the value)."""
    return {
        "config": {
            f"numa-kubelets:{key}": {"secure": "v" * len(value)} if key in SECRET_KEYS else value
            for key, value in config.items()
        }
    }


def test_625_hosts_x_8_fit_only_with_a_class():
    written_out = fleet_config(625, 8, cluster=True)
    assert stack_config_size(stack_file(written_out)).level == "error"
    assert stack_config_size(stack_file(with_class(written_out))).level != "error"


def write(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "Pulumi.fleet.yaml"
    path.write_text(json.dumps(stack_file(config)))  # JSON is YAML
    return path


def test_the_check_command_refuses_a_config_past_the_limit_before_the_engine_runs(tmp_path, capsys):
    path = write(tmp_path, fleet_config(625, 8, cluster=True))
    assert review.main(["check", str(path)]) == 1
    assert "error: the stack config takes 25" in capsys.readouterr().err


def test_the_check_command_warns_from_75_percent_and_passes(tmp_path, capsys):
    path = write(tmp_path, with_class(fleet_config(625, 8, cluster=True)))
    assert review.main(["check", str(path)]) == 0
    output = capsys.readouterr()
    assert "warning: the stack config takes" in output.err
    assert "valid: 625 host(s), 5000 kubelet(s)" in output.out


def test_the_renderer_reports_the_size_and_refuses_past_the_limit(tmp_path, capsys):
    small = write(tmp_path, fleet_config(2, 2, cluster=False))
    assert review.main(["render", str(small), "--out", str(tmp_path / "small")]) == 0
    assert "of Linux's 131,072-byte limit" in capsys.readouterr().out
    large = write(tmp_path, fleet_config(625, 8, cluster=False))
    assert review.main(["render", str(large), "--out", str(tmp_path / "large")]) == 1
    assert "error: " in capsys.readouterr().err
    assert not (tmp_path / "large").exists()


def test_the_example_stacks_are_far_from_the_limit():
    for path in Path(__file__).resolve().parents[2].glob("Pulumi.*.yaml"):
        assert stack_config_size(yaml.safe_load(path.read_text())).level == "ok"
