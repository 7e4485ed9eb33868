"""The kubelet stand-in's checks, run on the host without a VM."""

import json
import os
import socket
import textwrap
import threading
import time

import pytest

from tests.testhost import kubelet_standin as standin

VALID_FLAGS = [
    "--config=/etc/numa-kubelets/numa0/kubelet.yaml",
    "--root-dir=/var/lib/kubelet-numa0",
    "--hostname-override=numa-a-numa0",
]

VALID_CONFIG = {
    "apiVersion": "kubelet.config.k8s.io/v1beta1",
    "kind": "KubeletConfiguration",
    "cgroupDriver": "systemd",
    "cgroupRoot": "/numa0",
    "containerRuntimeEndpoint": "unix:///run/containerd-numa0/containerd.sock",
    "podLogsDir": "/var/log/pods-numa0",
    "port": 10350,
    "healthzPort": 10348,
    "readOnlyPort": 0,
    "maxPods": 1,
    "systemReserved": {"cpu": "4", "memory": "1Gi"},
}


def config_with(**changes):
    config = {**VALID_CONFIG, **changes}
    return {key: value for key, value in config.items() if value is not None}


# --- flags ------------------------------------------------------------------


def test_flag_only_flags_are_accepted():
    flags = standin.parse_flags(
        [
            *VALID_FLAGS,
            "--kubeconfig=/var/lib/kubelet-numa0/kubeconfig",
            "--bootstrap-kubeconfig=/etc/numa-kubelets/numa0/bootstrap-kubeconfig",
            "--cert-dir=/var/lib/kubelet-numa0/pki",
            "--node-labels=numa-type=red,numa-kubelets.io/numa-node=0,node.kubernetes.io/role=x",
            "--node-ip=192.0.2.10",
            "--v=2",
        ]
    )
    assert flags["hostname-override"] == "numa-a-numa0"
    assert flags["v"] == "2"


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--api-servers=https://x", "--api-servers was removed in Kubernetes 1.8; use --kubeconfig"),
        ("--cadvisor-port=4194", "--cadvisor-port was removed in Kubernetes 1.12"),
        ("--allow-privileged=true", "--allow-privileged was removed in Kubernetes 1.15"),
    ],
)
def test_removed_flags_are_refused(flag, message):
    with pytest.raises(standin.StandinError) as error:
        standin.parse_flags([*VALID_FLAGS, flag])
    assert error.value.problems == [message]


@pytest.mark.parametrize(
    "flag, field",
    [
        ("--port=10350", "port"),
        ("--healthz-port=10348", "healthzPort"),
        ("--read-only-port=0", "readOnlyPort"),
        ("--max-pods=1", "maxPods"),
        ("--cgroup-root=/numa0", "cgroupRoot"),
        ("--cgroup-driver=systemd", "cgroupDriver"),
        ("--container-runtime-endpoint=unix:///run/c.sock", "containerRuntimeEndpoint"),
        ("--pod-logs-dir=/var/log/pods-numa0", "podLogsDir"),
        ("--system-reserved=cpu=4", "systemReserved"),
    ],
)
def test_deprecated_flags_point_to_the_config_field(flag, field):
    with pytest.raises(standin.StandinError) as error:
        standin.parse_flags([*VALID_FLAGS, flag])
    assert error.value.problems == [
        f"{flag.split('=')[0]} is deprecated: set '{field}' in the KubeletConfiguration file (--config) instead"
    ]


def test_unknown_flags_and_positional_arguments_are_refused():
    with pytest.raises(standin.StandinError) as error:
        standin.parse_flags([*VALID_FLAGS, "--frobnicate=1", "stray"])
    assert error.value.problems == [
        "unknown flag: --frobnicate",
        "unexpected argument 'stray': the kubelet takes no positional arguments",
    ]


def test_space_separated_values_are_refused():
    with pytest.raises(standin.StandinError) as error:
        standin.parse_flags(["--config", "/etc/k.yaml", "--root-dir=/r", "--hostname-override=n"])
    assert "--config needs a value, in --config=value form" in error.value.problems


def test_required_flags_are_all_reported():
    with pytest.raises(standin.StandinError) as error:
        standin.parse_flags([])
    assert error.value.problems == [
        "--config is required",
        "--root-dir is required",
        "--hostname-override is required",
    ]


def test_duplicate_flags_are_refused():
    with pytest.raises(standin.StandinError) as error:
        standin.parse_flags([*VALID_FLAGS, "--root-dir=/var/lib/other"])
    assert error.value.problems == ["--root-dir given more than once"]


@pytest.mark.parametrize(
    "flag, fragment",
    [
        ("--root-dir=var/lib/kubelet", "must be an absolute path"),
        ("--hostname-override=Numa_A", "is not a valid node name"),
        ("--v=high", "must be a non-negative integer"),
        ("--node-ip=numa-a", "is not an IP address"),
        ("--node-labels=numa-type", "is not in key=value form"),
        ("--node-labels=numa type=red", "has an invalid name"),
        ("--node-labels=numa-type=red;blue", "has an invalid value"),
        ("--node-labels=kubernetes.io/role=worker", "is in the kubernetes.io/k8s.io namespace"),
    ],
)
def test_bad_flag_values_are_refused(flag, fragment):
    flags = [arg for arg in VALID_FLAGS if arg.split("=")[0] != flag.split("=")[0]] + [flag]
    with pytest.raises(standin.StandinError) as error:
        standin.parse_flags(flags)
    assert any(fragment in problem for problem in error.value.problems), error.value.problems


def test_allowed_kubernetes_labels_pass():
    labels = standin.parse_node_labels(
        "kubernetes.io/arch=amd64,topology.kubernetes.io/zone=a,x.kubelet.kubernetes.io/y="
    )
    assert standin.node_label_problems(labels) == []


# --- KubeletConfiguration -----------------------------------------------------


def test_valid_config_has_no_problem():
    assert standin.validate_config(VALID_CONFIG) == []


def test_load_config_parses_yaml_and_refuses_non_mappings():
    text = textwrap.dedent(
        """\
        apiVersion: kubelet.config.k8s.io/v1beta1
        kind: KubeletConfiguration
        cgroupRoot: /numa0
        """
    )
    assert standin.load_config(text)["cgroupRoot"] == "/numa0"
    with pytest.raises(standin.StandinError):
        standin.load_config("- a list\n")
    with pytest.raises(standin.StandinError):
        standin.load_config("key: [unclosed\n")


def test_wrong_api_version_and_kind():
    problems = standin.validate_config(config_with(apiVersion="kubelet.config.k8s.io/v1alpha1", kind="Kubelet"))
    assert problems == [
        "apiVersion must be 'kubelet.config.k8s.io/v1beta1', not 'kubelet.config.k8s.io/v1alpha1'",
        "kind must be 'KubeletConfiguration', not 'Kubelet'",
    ]


def test_unknown_top_level_fields_are_refused():
    problems = standin.validate_config(config_with(maxPod=1, cgroupsRoot="/numa0"))
    assert problems == ['unknown field "maxPod"', 'unknown field "cgroupsRoot"']


def test_every_documented_field_is_known():
    for field in (
        "enableServer",
        "staticPodPath",
        "syncFrequency",
        "tlsCertFile",
        "authentication",
        "authorization",
        "clusterDNS",
        "cgroupsPerQOS",
        "cpuManagerPolicy",
        "memoryManagerPolicy",
        "topologyManagerPolicy",
        "podPidsLimit",
        "resolvConf",
        "imageServiceEndpoint",
        "kubeReserved",
        "enforceNodeAllocatable",
        "failSwapOn",
        "evictionHard",
        "reservedSystemCPUs",
        "systemCgroups",
        "kubeletCgroups",
        "registerNode",
        "registerWithTaints",
        "nodeStatusUpdateFrequency",
        "containerLogMaxSize",
        "volumePluginDir",
        "serializeImagePulls",
        "failCgroupV1",
    ):
        assert field in standin.FIELD_TYPES


@pytest.mark.parametrize(
    "changes, problem",
    [
        ({"port": "10250"}, "port: '10250' is not a int"),
        ({"maxPods": True}, "maxPods: True is not a int"),
        ({"systemReserved": {"cpu": 4}}, "systemReserved: {'cpu': 4} is not a map[string]string"),
        ({"syncFrequency": "1 minute"}, "syncFrequency: '1 minute' is not a duration"),
        ({"clusterDNS": "10.96.0.10"}, "clusterDNS: '10.96.0.10' is not a []string"),
        ({"failSwapOn": "false"}, "failSwapOn: 'false' is not a bool"),
    ],
)
def test_field_types_are_checked_like_the_strict_decoder(changes, problem):
    assert standin.validate_config(config_with(**changes)) == [problem]


def test_cgroup_driver_must_be_systemd():
    assert standin.validate_config(config_with(cgroupDriver="cgroupfs")) == [
        "cgroupDriver must be 'systemd' (the kubelet and containerd must both use the systemd driver "
        "on this host), not 'cgroupfs'"
    ]
    problems = standin.validate_config(config_with(cgroupDriver=None))
    assert len(problems) == 1 and "not '<unset: cgroupfs>'" in problems[0]


@pytest.mark.parametrize(
    "cgroup_root, fragment",
    [
        (None, "cgroupRoot is required"),
        ("/numa0.slice", "would become numa0.slice.slice"),
        ("/numa-0", "'-' nests slices"),
        ("/numa_0", "'-' nests slices and '_' is mangled"),
        ("numa0", "must be '/<name>'"),
        ("/numa/0", "must be '/<name>'"),
    ],
)
def test_cgroup_root_must_be_convertible_by_the_systemd_driver(cgroup_root, fragment):
    problems = standin.validate_config(config_with(cgroupRoot=cgroup_root))
    assert len(problems) == 1 and fragment in problems[0], problems


def test_runtime_endpoint_must_be_a_unix_socket():
    missing = standin.validate_config(config_with(containerRuntimeEndpoint=None))
    assert len(missing) == 1 and "containerRuntimeEndpoint is required" in missing[0]
    problems = standin.validate_config(config_with(containerRuntimeEndpoint="/run/containerd-numa0/containerd.sock"))
    assert problems == [
        "containerRuntimeEndpoint '/run/containerd-numa0/containerd.sock' must be unix:///<absolute socket path>"
    ]
    assert standin.socket_path_of("unix:///run/c/containerd.sock") == "/run/c/containerd.sock"


@pytest.mark.parametrize("pod_logs_dir", [None, "/var/log/pods", "/var/log/pods/"])
def test_pod_logs_dir_must_be_set_and_not_shared(pod_logs_dir):
    problems = standin.validate_config(config_with(podLogsDir=pod_logs_dir))
    assert len(problems) == 1 and "podLogsDir" in problems[0]


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"port": 0}, "port 0 must be between 1 and 65535"),
        ({"healthzPort": 70000}, "healthzPort 70000 must be between 0 and 65535"),
        ({"address": "localhost"}, "address 'localhost' is not an IP address"),
        ({"systemReserved": {"cpus": "4"}}, "unsupported resource 'cpus'"),
        ({"systemReserved": {"memory": "1 GB"}}, "'1 GB' is not a quantity"),
        ({"evictionHard": {"memory.available": "lots"}}, "is not a quantity or percentage"),
        ({"reservedSystemCPUs": "0 4"}, "is not a cpulist"),
        ({"enforceNodeAllocatable": ["pods", "system-reserved"]}, "systemReservedCgroup must be set"),
        ({"enforceNodeAllocatable": ["none", "pods"]}, "'none' cannot be combined"),
        ({"cgroupsPerQOS": False}, "only supported with cgroupsPerQOS: true"),
        ({"topologyManagerPolicy": "numa"}, "is not one of none, best-effort, restricted, single-numa-node"),
    ],
)
def test_value_checks(changes, fragment):
    problems = standin.validate_config(config_with(**changes))
    assert len(problems) == 1 and fragment in problems[0], problems


def test_listen_addresses_follow_the_v1beta1_defaults():
    assert standin.listen_addresses({}) == {"server": ("0.0.0.0", 10250), "healthz": ("127.0.0.1", 10248)}
    assert standin.listen_addresses({"port": 10350, "healthzPort": 0, "readOnlyPort": 10355}) == {
        "server": ("0.0.0.0", 10350),
        "read-only": ("0.0.0.0", 10355),
    }
    assert standin.listen_addresses({"enableServer": False}) == {"healthz": ("127.0.0.1", 10248)}


# --- environment -------------------------------------------------------------------


def test_cgroup_placement():
    assert standin.cgroup_placement_problems("0::/numa0.slice/kubelet@numa0.service\n", "/numa0") == []
    wrong_slice = standin.cgroup_placement_problems("0::/system.slice/kubelet@numa0.service\n", "/numa0")
    assert wrong_slice == [
        "running in cgroup /system.slice/kubelet@numa0.service, not inside numa0.slice: the kubelet unit "
        "needs Slice=numa0.slice so the kubelet and its pods share the NUMA node's slice"
    ]
    cgroup_v1 = "12:cpuset:/\n11:memory:/system.slice\n0::/system.slice\n"
    assert "cgroup v1" in standin.cgroup_placement_problems(cgroup_v1, "/numa0")[0]


HOST_MOUNTINFO = textwrap.dedent(
    """\
    22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
    25 22 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw
    """
)
# As seen by a unit with BindPaths=/var/lib/kubelet-numa0/device-plugins:/var/lib/kubelet/device-plugins
UNIT_MOUNTINFO = HOST_MOUNTINFO + (
    "243 22 254:0 /var/lib/kubelet-numa0/device-plugins /var/lib/kubelet/device-plugins "
    "rw,relatime shared:132 master:1 - ext4 /dev/vda rw\n"
)


def test_device_plugins_view_from_bind_paths_is_private():
    assert standin.device_plugins_problems(UNIT_MOUNTINFO, HOST_MOUNTINFO, "mnt:[2]", "mnt:[1]") == []
    mount = standin.mount_at(standin.parse_mountinfo(UNIT_MOUNTINFO), standin.DEVICE_PLUGINS_DIR)
    assert mount["root"] == "/var/lib/kubelet-numa0/device-plugins"


def test_device_plugins_shared_with_the_host_is_refused():
    not_mounted = standin.device_plugins_problems(HOST_MOUNTINFO, HOST_MOUNTINFO, "mnt:[2]", "mnt:[1]")
    assert "is not a mount point for this process" in not_mounted[0]
    host_namespace = standin.device_plugins_problems(UNIT_MOUNTINFO, UNIT_MOUNTINFO, "mnt:[1]", "mnt:[1]")
    assert "mounted in the host's mount namespace" in host_namespace[0]
    same_as_host = standin.device_plugins_problems(UNIT_MOUNTINFO, UNIT_MOUNTINFO, "mnt:[2]", "mnt:[1]")
    assert "is the same directory the host sees" in same_as_host[0]


def test_mountinfo_escapes_are_decoded():
    line = "30 22 254:0 /a\\040b /mnt/a\\040b rw - ext4 /dev/vda rw\n"
    assert standin.parse_mountinfo(line)[0]["mount_point"] == "/mnt/a b"


def test_status_fields():
    status = "Name:\tkubelet\nCpus_allowed_list:\t1-3\nMems_allowed_list:\t0\n"
    assert standin.status_field(status, "Cpus_allowed_list") == "1-3"
    assert standin.status_field(status, "Mems_allowed_list") == "0"


def test_wait_for_runtime_waits_for_a_listening_socket(tmp_path):
    path = str(tmp_path / "containerd.sock")
    assert "does not exist" in standin.wait_for_runtime(path, timeout=0.2)

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)  # bound but not listening: what a crashed runtime leaves behind
    assert "does not accept connections" in standin.wait_for_runtime(path, timeout=0.2)
    stale.close()
    os.unlink(path)

    def listen_later():
        time.sleep(0.5)
        server.bind(path)
        server.listen()

    thread = threading.Thread(target=listen_later)
    thread.start()
    try:
        assert standin.wait_for_runtime(path, timeout=10) is None
    finally:
        thread.join()
        server.close()


def test_colliding_ports_fail_like_a_second_kubelet():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (first,) = standin.serve({"healthz": ("127.0.0.1", port)})
    try:
        with pytest.raises(standin.StandinError) as error:
            standin.serve({"healthz": ("127.0.0.1", port)})
        assert error.value.problems == [f"healthz on 127.0.0.1:{port}: Address already in use"]
    finally:
        first.shutdown()
        first.server_close()


def test_version_line_says_it_is_not_a_kubelet(capsys):
    assert standin.run(["--version"]) == 0
    assert capsys.readouterr().out == "Kubernetes v1.35.0 (numa-kubelets test stand-in, not a kubelet)\n"


def test_record_is_written_atomically(tmp_path):
    path = tmp_path / "standin-record.json"
    standin.write_json_atomically(str(path), {"pid": 1})
    assert path.read_text() == '{\n  "pid": 1\n}\n'
    assert [entry.name for entry in tmp_path.iterdir()] == ["standin-record.json"]


def test_config_dir_dropins_merge_in_lexical_order(tmp_path):
    from tests.testhost.kubelet_standin import merge_dropin, read_dropins

    (tmp_path / "20-b.conf").write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsystemReserved: {memory: 2Gi}\n"
    )
    (tmp_path / "10-a.conf").write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsystemReserved: {cpu: '5', memory: 1Gi}\n"
    )
    (tmp_path / "ignored.yaml").write_text("not: a drop-in\n")
    config = {"maxPods": 1, "systemReserved": {"ephemeral-storage": "1Gi"}}
    for _, dropin in read_dropins(str(tmp_path)):
        config = merge_dropin(config, dropin)
    assert config["systemReserved"] == {"ephemeral-storage": "1Gi", "cpu": "5", "memory": "2Gi"}
    assert config["maxPods"] == 1


def test_a_dropin_without_its_header_is_refused(tmp_path):
    from tests.testhost.kubelet_standin import StandinError, read_dropins

    (tmp_path / "50.conf").write_text("systemReserved: {cpu: '1'}\n")
    with pytest.raises(StandinError, match="apiVersion"):
        read_dropins(str(tmp_path))


# ---------------------------------------------------------------- resource managers

STATIC = {
    "cpuManagerPolicy": "static",
    "reservedSystemCPUs": "0,4-7",
    "memoryManagerPolicy": "Static",
    "systemReserved": {"cpu": "5", "memory": "1000060Ki"},
    "reservedMemory": [
        {"numaNode": 0, "limits": {"memory": str(1000060 * 1024)}},
        {"numaNode": 1, "limits": {"memory": "100Mi"}},
    ],
}


def test_consistent_static_managers_pass():
    assert standin.manager_problems(STATIC, set(range(8)), [0, 1]) == []


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"cpuManagerPolicyOptions": {"strict-cpu-reservation": "yes", "bogus": "true"}}, "unknown option 'bogus'"),
        ({"cpuManagerPolicyOptions": {"align-by-socket": "true"}}, "align-by-socket is alpha"),
        ({"cpuManagerPolicy": "none", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}, "need cpuManagerPolicy"),
        ({"reservedSystemCPUs": "0,4-9"}, "CPUs [8, 9] are not online"),
        ({"reservedSystemCPUs": None, "systemReserved": {"cpu": "0", "memory": "1000060Ki"}}, "needs reserved CPUs"),
        ({"evictionHard": {"memory.available": "200Mi"}}, "is not equal to the value"),
        ({"kubeReserved": {"memory": "1"}}, "is not equal to the value"),
        ({"reservedMemory": [{"numaNode": 2, "limits": {"memory": "1"}}]}, "NUMA node 2 does not exist"),
        ({"reservedMemory": []}, "needs reservedMemory"),
        ({"reservedMemory": [{"numaNode": 0, "limits": {"memory": "0"}}]}, "reserves no memory"),
        ({"memoryManagerPolicy": "None"}, "only used with memoryManagerPolicy: Static"),
    ],
)
def test_resource_manager_settings_the_kubelet_refuses(changes, fragment):
    config = {key: value for key, value in {**STATIC, **changes}.items() if value is not None}
    problems = standin.manager_problems(config, set(range(8)), [0, 1])
    assert any(fragment in problem for problem in problems), problems


def test_the_topology_manager_refuses_more_than_eight_nodes_without_the_option():
    config = {"topologyManagerPolicy": "single-numa-node"}
    assert "need max-allowable-numa-nodes" in standin.manager_problems(config, set(range(9)), list(range(9)))[0]
    config["topologyManagerPolicyOptions"] = {"max-allowable-numa-nodes": "9"}
    assert standin.manager_problems(config, set(range(9)), list(range(9))) == []


def test_state_files_of_the_same_settings_are_accepted_others_refused():
    cpu, memory = standin.new_state_files(STATIC).values()
    assert standin.state_file_problems(STATIC, cpu, memory) == []
    assert standin.state_file_problems(STATIC, None, None) == []
    none_cpu, none_memory = standin.new_state_files({}).values()
    problems = standin.state_file_problems(STATIC, none_cpu, none_memory)
    assert "configured policy 'static' differs from state checkpoint policy 'none'" in problems[0]
    assert "configured policy 'Static' differs from state checkpoint policy 'None'" in problems[1]
    assert standin.state_file_problems({}, cpu, None)[0].startswith("could not restore state from checkpoint")
    moved = {**STATIC, "reservedSystemCPUs": "0-1,4-7"}
    assert "reserved CPUs 0-1,4-7 differ" in standin.state_file_problems(moved, cpu, memory)[0]
    hugepages_moved = {**STATIC, "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1"}}]}
    assert "expected machine state is different" in standin.state_file_problems(hugepages_moved, cpu, memory)[0]


def test_checkpoints_are_written_and_refused_on_disk(tmp_path, monkeypatch):
    online = tmp_path / "online"
    online.write_text("0-7\n")
    nodes = tmp_path / "node"
    (nodes / "node0").mkdir(parents=True)
    (nodes / "node1").mkdir()
    real_read_text, real_listdir = standin.read_text, os.listdir
    monkeypatch.setattr(
        standin, "read_text", lambda path: real_read_text(str(online) if path.endswith("cpu/online") else path)
    )
    monkeypatch.setattr(standin.os, "listdir", lambda path: real_listdir(nodes if path.endswith("/node") else path))
    root = tmp_path / "root"
    root.mkdir()
    assert standin.check_resource_managers({}, str(root)) == {"cpu_manager_state": None, "memory_manager_state": None}
    assert json.loads((root / "cpu_manager_state").read_text()) == {"policyName": "none"}
    with pytest.raises(standin.StandinError, match="differs from state checkpoint policy 'none'"):
        standin.check_resource_managers(STATIC, str(root))
    (root / "cpu_manager_state").unlink()
    (root / "memory_manager_state").unlink()
    seen = standin.check_resource_managers(STATIC, str(root))
    assert seen == {"cpu_manager_state": None, "memory_manager_state": None}
    assert standin.check_resource_managers(STATIC, str(root))["cpu_manager_state"]["policyName"] == "static"
