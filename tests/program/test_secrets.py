"""Secret keys given in plain text are refused before any resource, naming the command to use.

The engine names the config keys set with `pulumi config set --secret` to the program (the
language host through PULUMI_CONFIG_SECRET_KEYS, then `set_all_config`); the harness plays both.
"""

import json

import pulumi
import pytest

from tests.program import harness
from tests.program.conftest import BOOTSTRAP_TOKEN, KUBECONFIG, SSH_KEY

SECRETS = ("sshPrivateKey", "bootstrapToken", "kubeconfig")


def recording(monkeypatch) -> harness.RecordingMocks:
    """The mocks the next run records its resources with."""
    mocks = harness.RecordingMocks()
    monkeypatch.setattr(harness, "RecordingMocks", lambda **_: mocks)
    return mocks


@pytest.mark.parametrize("plain", SECRETS)
def test_a_secret_in_plain_text_is_refused_with_the_command_to_set_it(monkeypatch, cluster_config, plain):
    mocks = recording(monkeypatch)
    with pytest.raises(pulumi.RunError) as failure:
        harness.run_program(cluster_config, secret_keys=tuple(key for key in SECRETS if key != plain))
    message = str(failure.value)
    assert message.startswith("invalid numa-kubelets configuration (1 problem(s)):")
    assert f"  - {plain}: is a secret but is set in plain text" in message
    assert f"pulumi config set --secret numa-kubelets:{plain}" in message
    for value in (BOOTSTRAP_TOKEN, SSH_KEY, KUBECONFIG):  # the message repeats no secret
        assert value.strip() not in message
    assert mocks.resources == []  # before any resource


def test_every_plain_secret_is_named_at_once_with_the_other_problems(monkeypatch, cluster_config):
    cluster_config["hosts"][0]["sshPort"] = 0
    mocks = recording(monkeypatch)
    with pytest.raises(pulumi.RunError) as failure:
        harness.run_program(cluster_config, secret_keys=())
    lines = str(failure.value).splitlines()
    assert lines[0] == "invalid numa-kubelets configuration (4 problem(s)):"
    assert [line.split(":", 1)[0] for line in lines[1:]] == [
        "  - bootstrapToken",
        "  - hosts[0].sshPort",
        "  - kubeconfig",
        "  - sshPrivateKey",
    ]
    assert "pulumi config set --secret numa-kubelets:sshPrivateKey < ~/.ssh/id_ed25519" in lines[4]
    assert "pulumi config set --secret numa-kubelets:kubeconfig < ~/.kube/config" in lines[3]
    assert lines[1].endswith("pulumi config set --secret numa-kubelets:bootstrapToken")  # at the prompt
    assert mocks.resources == []


def test_secrets_set_as_secrets_are_taken(monkeypatch, cluster_config):
    result = harness.run_program(cluster_config, secret_keys=SECRETS)
    [preflight] = result.of_type("pulumi-python:dynamic/numa-kubelets:ClusterPreflight")
    assert preflight.inputs["bootstrapToken"] == BOOTSTRAP_TOKEN
    assert harness.is_secret_envelope(preflight.raw_inputs["bootstrapToken"])


def test_the_secret_keys_the_language_host_hands_over_in_the_environment_count(monkeypatch, cluster_config):
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps([f"numa-kubelets:{key}" for key in SECRETS]))
    result = harness.run_program(cluster_config, secret_keys=())
    assert result.of_type("pulumi-python:dynamic/numa-kubelets:ClusterPreflight")


def test_other_keys_need_no_secret_and_a_stack_without_secrets_runs(monkeypatch, dev_config):
    # sshPrivateKeyPath is a path, not a secret; no cluster, no token, no kubeconfig.
    result = harness.run_program(dev_config, secret_keys=())
    assert result.commands()
