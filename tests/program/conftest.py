import pytest

from tests.program.harness import load_stack_file
from tests.unit.builders import HOST_KEY

BOOTSTRAP_TOKEN = "abcdef.0123456789abcdef"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END OPENSSH PRIVATE KEY-----\n"
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user: {token: kubeconfig-secret-0123456789}\n"


@pytest.fixture
def dev_config(tmp_path):
    config = load_stack_file("dev")
    key = tmp_path / "id_ed25519"
    key.write_text(SSH_KEY)
    config["sshPrivateKeyPath"] = str(key)
    return config


@pytest.fixture
def cluster_config():
    """Two hosts with four NUMA nodes each, joining a cluster; every secret set."""
    config = load_stack_file("example-cluster")
    config["hosts"] = [
        {
            "name": name,
            "address": address,
            "hostKey": HOST_KEY,
            "numaNodes": [{"id": i, "cpus": f"{8 * i}-{8 * i + 7}"} for i in range(4)],
            "kubelets": [{"numaNode": i, "labels": {"numa-slot": f"{name}-{i}"}} for i in range(4)],
        }
        for name, address in (("numa-a", "192.0.2.10"), ("numa-b", "192.0.2.11"))
    ]
    config["demo"] = {"enabled": False}
    config["bootstrapToken"] = BOOTSTRAP_TOKEN
    config["sshPrivateKey"] = SSH_KEY
    config["kubeconfig"] = KUBECONFIG
    return config
