"""Files rendered for a host: slice units, drop-ins, containerd and kubelet units and configs."""

from __future__ import annotations

import fcntl
import shlex
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from numa_kubelets import hugepages
from numa_kubelets import render as render_module
from numa_kubelets.cpulist import CpuSet
from numa_kubelets.plan import Plan
from numa_kubelets.render import (
    HostFile,
    bootstrap_kubeconfig,
    cgroup_controllers_shell,
    containerd_config,
    containerd_namespace_script,
    containerd_prepare_script,
    containerd_unit,
    host_service_dropins,
    kubelet_config,
    kubelet_files,
    kubelet_unit,
    namespace_script,
    prepare_script,
    release_cgroup_controllers_shell,
    slice_unit,
)
from numa_kubelets.scripts import slice_scripts
from tests.unit.builders import (
    BOOTSTRAP_TOKEN,
    CA_CERT,
    SERVER,
    origin_config,
    origin_host,
    plan_of,
    rendered_files,
    with_cluster,
)

UNIT_DIR = "/etc/systemd/system/"

REMOVED_OR_DEPRECATED_FLAGS = {
    "--api-servers",
    "--cadvisor-port",
    "--allow-privileged",
    "--port",
    "--healthz-port",
    "--read-only-port",
    "--max-pods",
    "--cgroup-root",
    "--cgroup-driver",
    "--container-runtime-endpoint",
    "--pod-logs-dir",
}


def unit_values(text: str, section: str, key: str) -> list[str]:
    """Values of `key` in `[section]` of a unit file, continuation lines joined as systemd does."""
    values = []
    current = None
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith(("#", ";")) or not line.strip():
            continue
        if line.startswith("["):
            current = line.strip()[1:-1]
        elif current == section:
            name, _, value = line.partition("=")
            if name.strip() == key:
                values.append(value.strip())
    return values


def unit_value(text: str, section: str, key: str) -> str:
    values = unit_values(text, section, key)
    assert len(values) == 1, f"expected one {key}= in [{section}], found {values}"
    return values[0]


def exec_start(unit: HostFile) -> list[str]:
    return shlex.split(unit_value(unit.content, "Service", "ExecStart"))


def flags(arguments: list[str]) -> dict[str, str]:
    return dict(argument.split("=", 1) for argument in arguments if argument.startswith("--") and "=" in argument)


def kubelet_document(file: HostFile) -> dict:
    return yaml.safe_load(file.content)


@pytest.fixture
def origin() -> Plan:
    return plan_of(origin_config())


@pytest.fixture
def clustered() -> Plan:
    return plan_of(with_cluster(origin_config()))


# ---------------------------------------------------------------- slices and host services


@pytest.mark.parametrize(("index", "cpus", "mems"), [(0, "1-3", "0"), (1, "5-7", "1")])
def test_slice_unit_confines_the_numa_node(origin, index, cpus, mems):
    unit = slice_unit(origin.kubelets[index])
    assert unit.path == f"/etc/systemd/system/numa{index}.slice"
    assert unit_value(unit.content, "Slice", "AllowedCPUs") == cpus
    assert unit_value(unit.content, "Slice", "AllowedMemoryNodes") == mems


@pytest.mark.parametrize(
    ("unit", "section"), [("system.slice", "Slice"), ("init.scope", "Scope"), ("user.slice", "Slice")]
)
def test_host_services_are_kept_on_the_system_cpus(origin, unit, section):
    dropins = {file.path: file for file in host_service_dropins(origin.hosts[0])}
    dropin = next(file for path, file in dropins.items() if path.startswith(f"{UNIT_DIR}{unit}.d/"))
    assert dropin.path.endswith(".conf")
    assert CpuSet.parse(unit_value(dropin.content, section, "AllowedCPUs")) == CpuSet([0, 4])
    assert CpuSet.parse(unit_value(dropin.content, section, "AllowedMemoryNodes")) == CpuSet([0, 1])
    assert len(dropins) == 3


# ---------------------------------------------------------------- kubelet configuration


def test_kubelet_configuration_of_the_origin(origin):
    numa0, numa1 = (kubelet_document(kubelet_config(k, origin.cluster)) for k in origin.kubelets)
    for document, instance, port, healthz in ((numa0, "numa0", 10250, 10248), (numa1, "numa1", 10350, 10348)):
        assert document["apiVersion"] == "kubelet.config.k8s.io/v1beta1"
        assert document["kind"] == "KubeletConfiguration"
        assert document["cgroupDriver"] == "systemd"
        assert document["cgroupRoot"] == f"/{instance}"
        assert document["readOnlyPort"] == 0
        assert (document["port"], document["healthzPort"]) == (port, healthz)
        assert document["containerRuntimeEndpoint"] == f"unix:///run/containerd-{instance}/containerd.sock"
        assert document["authentication"]["anonymous"]["enabled"] is False
    assert numa0["podLogsDir"] != numa1["podLogsDir"]


def test_cgroup_root_is_a_cgroupfs_name_the_systemd_driver_can_convert():
    nodes = [{"id": i, "cpus": f"{2 * i}-{2 * i + 1}"} for i in (0, 1, 7, 12)]
    plan = plan_of(origin_config(hosts=[origin_host(numaNodes=nodes)]))
    for kubelet in plan.kubelets:
        root = kubelet_document(kubelet_config(kubelet, plan.cluster))["cgroupRoot"]
        assert root == f"/numa{kubelet.numa_node}"
        assert not root.endswith(".slice")
        assert "-" not in root and "_" not in root
        assert f"{root[1:]}.slice" == kubelet.layout.slice


def test_max_pods_and_read_only_port_reach_the_configuration():
    kubelets = [{"numaNode": 0, "maxPods": 1, "readOnlyPort": 10255}]
    plan = plan_of(origin_config(hosts=[origin_host(kubelets=kubelets)]))
    document = kubelet_document(kubelet_config(plan.kubelets[0], plan.cluster))
    assert (document["maxPods"], document["readOnlyPort"]) == (1, 10255)


def test_kubelet_configuration_in_a_cluster_checks_client_certificates(clustered):
    kubelet = clustered.kubelets[0]
    document = kubelet_document(kubelet_config(kubelet, clustered.cluster))
    assert document["authentication"]["x509"]["clientCAFile"] == kubelet.layout.ca_cert
    assert document["authentication"]["webhook"]["enabled"] is True
    assert document["authentication"]["anonymous"]["enabled"] is False
    assert document["authorization"]["mode"] == "Webhook"


# ---------------------------------------------------------------- kubelet unit


@pytest.mark.parametrize("joins_cluster", [False, True], ids=["standalone", "cluster"])
def test_kubelet_command_line_uses_only_flag_only_options(joins_cluster):
    raw = with_cluster(origin_config()) if joins_cluster else origin_config()
    plan = plan_of(raw)
    for kubelet in plan.kubelets:
        unit = kubelet_unit(kubelet, plan)
        launcher = exec_start(unit)
        # unshare and the namespace launcher come first; the launcher execs the rest.
        arguments = launcher[launcher.index(plan.kubelet_path) :]
        used = {argument.split("=", 1)[0] for argument in arguments[1:]}
        assert not used & REMOVED_OR_DEPRECATED_FLAGS
        assert all(argument.startswith("--") and "=" in argument for argument in arguments[1:])
        assert {"--hostname-override", "--node-labels", "--root-dir", "--cert-dir", "--config"} <= used
        assert ({"--bootstrap-kubeconfig", "--kubeconfig"} <= used) == joins_cluster


def test_kubelet_flags_of_the_origin(origin):
    kubelet = origin.kubelets[1]
    given = flags(exec_start(kubelet_unit(kubelet, origin)))
    assert given["--hostname-override"] == "numa-a-numa1"
    assert given["--root-dir"] == "/var/lib/kubelet-numa1"
    assert given["--cert-dir"].startswith("/var/lib/kubelet-numa1/")
    assert given["--config"] == kubelet_config(kubelet, origin.cluster).path
    assert given["--config"].startswith("/etc/numa-kubelets/numa1/")
    assert dict(label.split("=", 1) for label in given["--node-labels"].split(",")) == kubelet.label_map


def test_kubelet_flags_in_a_cluster_point_at_the_bootstrap_kubeconfig(clustered):
    kubelet = clustered.kubelets[0]
    given = flags(exec_start(kubelet_unit(kubelet, clustered)))
    assert given["--bootstrap-kubeconfig"] == bootstrap_kubeconfig(kubelet, clustered.cluster, BOOTSTRAP_TOKEN).path
    assert given["--kubeconfig"].startswith(kubelet.layout.root_dir + "/")
    assert given["--cert-dir"] != flags(exec_start(kubelet_unit(clustered.kubelets[1], clustered)))["--cert-dir"]


def test_kubelet_unit_runs_in_its_slice_after_its_own_runtime(origin):
    for kubelet in origin.kubelets:
        unit = kubelet_unit(kubelet, origin)
        instance = kubelet.layout.instance
        assert unit.path == f"/etc/systemd/system/kubelet@{instance}.service"
        assert unit_value(unit.content, "Service", "Slice") == f"{instance}.slice"
        assert f"containerd@{instance}.service" in unit_value(unit.content, "Unit", "After").split()
        assert f"containerd@{instance}.service" in unit_value(unit.content, "Unit", "Wants").split()


def test_kubelet_runs_in_its_own_mount_namespace_with_a_private_device_plugins_directory(origin):
    sources = set()
    for kubelet in origin.kubelets:
        unit = kubelet_unit(kubelet, origin)
        # BindPaths= would cut the propagation of pod volume mounts to the host and containerd.
        assert "BindPaths" not in unit.content
        command = exec_start(unit)
        launcher = namespace_script(kubelet)
        assert command[:6] == ["/usr/bin/unshare", "--mount", "--propagation", "unchanged", "--", "/bin/sh"]
        assert command[6:8] == [launcher.path, origin.kubelet_path]
        bind = f"mount --bind {kubelet.layout.device_plugins_dir} /var/lib/kubelet/device-plugins\n"
        assert bind in launcher.content and launcher.content.endswith('exec "$@"\n')
        # Before the kubelet starts, its hugepages become its own node's (tests/unit/test_hugepages.py).
        assert launcher.content.endswith(hugepages.view_shell(kubelet.numa_node) + 'exec "$@"\n')
        sources.add(kubelet.layout.device_plugins_dir)
    assert len(sources) == 2


def test_kubelet_prepares_its_reservation_and_the_host_mount_point_before_starting(origin):
    kubelet = origin.kubelets[0]
    unit = kubelet_unit(kubelet, origin)
    script = prepare_script(kubelet)
    assert shlex.split(unit_value(unit.content, "Service", "ExecStartPre")) == ["/bin/sh", script.path]
    assert script.path in [file.path for file in kubelet_files(kubelet, origin)]
    assert flags(exec_start(unit))["--config-dir"] + "/50-system-reserved.conf" in script.content
    assert "node_root=/sys/devices/system/node\nmeminfo=/proc/meminfo\n" in script.content
    assert "own_kib=$(node_kib 0)\n" in script.content
    assert f'cpu: "{kubelet.reserved_cpus}"' in script.content
    assert "mount --make-private /var/lib/kubelet/device-plugins\n" in script.content


def fake_cgroup_fs(root: Path, subtree_control: str, slice_controllers: str) -> Path:
    """A cgroup2 root as the test host shows it (systemd 252): hugetlb available, never enabled."""
    (root / "numa0.slice").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (root / "cgroup.subtree_control").write_text(subtree_control + "\n")
    (root / "numa0.slice" / "cgroup.controllers").write_text(slice_controllers + "\n")
    return root


def test_kubelet_start_offers_its_slice_every_cgroup_controller_the_kubelet_requires(origin, tmp_path):
    """Found by the real kubelet 1.37.2 on the test host: `invalid configuration: cgroup ["numa0"]
    has some missing controllers: hugetlb` (systemd turns on cpu, cpuset, io, memory and pids only)."""
    kubelet = origin.kubelets[0]
    assert cgroup_controllers_shell("numa0.slice") in prepare_script(kubelet).content
    record = tmp_path / "run" / "root-cgroup-controllers"
    # The kernel lists hugetlb in the slice's cgroup.controllers once the root's subtree_control has it.
    fs = fake_cgroup_fs(tmp_path / "cgroup", "cpuset cpu io memory pids", "cpuset cpu io memory hugetlb pids")
    script = cgroup_controllers_shell("numa0.slice", str(fs), str(record))
    subprocess.run(["sh", "-eu", "-c", script], check=True)
    assert (fs / "cgroup.subtree_control").read_text() == "+hugetlb\n"  # only what was missing
    assert record.read_text() == "cpuset cpu io memory pids\n"  # as it was before
    # A slice still without it fails before the kubelet starts, naming the controller.
    (fs / "cgroup.subtree_control").write_text("cpuset cpu io memory pids\n")
    (fs / "numa0.slice" / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    failed = subprocess.run(["sh", "-eu", "-c", script], capture_output=True, text=True)
    assert failed.returncode == 1
    assert "numa0.slice lacks the hugetlb cgroup controller" in failed.stderr
    assert record.read_text() == "cpuset cpu io memory pids\n"  # recorded once per boot
    host = origin.hosts[0]
    assert release_cgroup_controllers_shell() in slice_scripts(host, kubelet).delete


def test_removing_the_last_slice_turns_off_what_the_kubelets_turned_on_but_not_systemds(tmp_path):
    record = tmp_path / "root-cgroup-controllers"
    record.write_text("cpuset cpu io memory pids\n")
    writes = tmp_path / "writes"
    # What the root has after the kubelets and runc ran (runc turns on rdma and misc too); systemd
    # has turned cpuset off meanwhile. Each write is kept to see them all.
    fs = fake_cgroup_fs(tmp_path / "cgroup", "cpu io memory hugetlb pids rdma misc", "")
    script = release_cgroup_controllers_shell(str(fs), str(record)).replace(
        f"> {fs}/cgroup.subtree_control 2>", f">> {writes} 2>"
    )
    subprocess.run(["sh", "-eu", "-c", script], check=True)
    assert writes.read_text().split() == ["-hugetlb", "-rdma", "-misc"]
    assert not record.exists()


def test_a_refused_release_is_tried_again(tmp_path):
    """The kernel refuses to turn a controller off while a child cgroup still uses it: here the
    writes fail until their directory appears, a second after the release started."""
    record = tmp_path / "root-cgroup-controllers"
    record.write_text("cpuset cpu io memory pids\n")
    (tmp_path / "root-cgroup-controllers.lock").touch()
    writes = tmp_path / "later" / "writes"
    fs = fake_cgroup_fs(tmp_path / "cgroup", "cpu io memory hugetlb pids", "")
    script = release_cgroup_controllers_shell(str(fs), str(record)).replace(
        f"> {fs}/cgroup.subtree_control 2>", f">> {writes} 2>"
    )
    later = subprocess.Popen(["sh", "-c", f"sleep 1.5; mkdir {writes.parent}"])
    subprocess.run(["sh", "-eu", "-c", script], check=True, timeout=30)
    later.wait()
    assert writes.read_text().split() == ["-hugetlb"]
    assert not record.exists() and not (tmp_path / "root-cgroup-controllers.lock").exists()


def test_of_slices_removed_side_by_side_one_releases_and_the_others_wait_and_find_nothing_to_do(tmp_path):
    """Each removal that finds no slice left runs the release: the second waits for the first's
    lock, then finds the record gone and succeeds without a write."""
    record = tmp_path / "root-cgroup-controllers"
    record.write_text("cpuset cpu io memory pids\n")
    lock = tmp_path / "root-cgroup-controllers.lock"
    writes = tmp_path / "writes"
    fs = fake_cgroup_fs(tmp_path / "cgroup", "cpu io memory hugetlb pids", "")
    script = release_cgroup_controllers_shell(str(fs), str(record)).replace(
        f"> {fs}/cgroup.subtree_control 2>", f">> {writes} 2>"
    )
    with lock.open("w") as first:  # the first removal, releasing
        fcntl.flock(first, fcntl.LOCK_EX)
        second = subprocess.Popen(["sh", "-eu", "-c", script], stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        assert second.poll() is None, "the second removal did not wait for the first's lock"
        record.unlink()  # what the first does before it lets go
    _, stderr = second.communicate(timeout=30)
    assert second.returncode == 0, stderr
    assert not writes.exists() and not lock.exists()


# ---------------------------------------------------------------- containerd


def test_containerd_unit_runs_delegated_in_the_slice_with_a_private_run_containerd(origin):
    sources = set()
    for kubelet in origin.kubelets:
        unit = containerd_unit(kubelet, origin.containerd_path)
        instance = kubelet.layout.instance
        assert unit.path == f"/etc/systemd/system/containerd@{instance}.service"
        assert unit_value(unit.content, "Service", "Slice") == f"{instance}.slice"
        assert unit_value(unit.content, "Service", "Delegate") == "yes"
        # systemd's mount namespace would keep the pods' network namespaces from the host.
        assert "BindPaths" not in unit.content and "PrivateMounts=yes" not in unit.content
        launcher = containerd_namespace_script(kubelet)
        command = exec_start(unit)
        assert command[:6] == ["/usr/bin/unshare", "--mount", "--propagation", "unchanged", "--", "/bin/sh"]
        assert command[6:] == [launcher.path, origin.containerd_path, "--config", containerd_config(kubelet).path]
        [bind] = [line.split() for line in launcher.content.splitlines() if line.startswith("bind_private ")]
        source, target = bind[1:]
        assert target == "/run/containerd"
        runtime_directories = unit_value(unit.content, "Service", "RuntimeDirectory").split()
        assert source.removeprefix("/run/") in runtime_directories, "systemd must create the bind source"
        assert launcher.content.rstrip().endswith('exec "$@"')
        sources.add(source)
        prepare = containerd_prepare_script(kubelet)
        assert unit_value(unit.content, "Service", "ExecStartPre") == f"/bin/sh {prepare.path}"
        assert "mount --make-shared /run/netns\n" in prepare.content
    assert len(sources) == 2


def test_containerd_launcher_makes_only_the_mounts_it_binds_over_slaves(origin):
    """The bind stays in containerd's namespace; /run/netns, a mount of its own, stays a peer of the host's."""
    launcher = containerd_namespace_script(origin.kubelets[0]).content
    function = launcher[launcher.index("bind_private() {") : launcher.index("}\n", launcher.index("bind_private() {"))]
    make_slave = function.index("mount --make-slave")
    assert "--make-rslave" not in launcher and "--make-private" not in launcher
    assert make_slave < function.index('mount --bind "$1" "$2"')
    assert 'findmnt --noheadings --output TARGET --target "$2"' in function


def test_containerd_config_has_its_own_root_state_and_socket(origin):
    seen = set()
    for kubelet in origin.kubelets:
        config = tomllib.loads(containerd_config(kubelet).content)
        instance = kubelet.layout.instance
        assert config["root"] == f"/var/lib/containerd-{instance}"
        assert config["state"] == f"/run/containerd-{instance}"
        assert config["grpc"]["address"] == f"/run/containerd-{instance}/containerd.sock"
        runc = config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["runc"]
        assert runc["options"]["SystemdCgroup"] is True
        endpoint = kubelet_document(kubelet_config(kubelet, origin.cluster))["containerRuntimeEndpoint"]
        assert endpoint == "unix://" + config["grpc"]["address"]
        seen.add((config["root"], config["state"], config["grpc"]["address"], config["ttrpc"]["address"]))
    assert len(seen) == 2


# ---------------------------------------------------------------- cluster credentials


def test_bootstrap_kubeconfig_carries_server_ca_and_token(clustered):
    kubelet = clustered.kubelets[1]
    file = bootstrap_kubeconfig(kubelet, clustered.cluster, BOOTSTRAP_TOKEN)
    document = yaml.safe_load(file.content)
    context = next(c["context"] for c in document["contexts"] if c["name"] == document["current-context"])
    cluster = next(c["cluster"] for c in document["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in document["users"] if u["name"] == context["user"])
    assert cluster["server"] == SERVER
    assert cluster["certificate-authority"] == kubelet.layout.ca_cert
    assert user["token"] == BOOTSTRAP_TOKEN
    assert file.mode == "0600"


def test_ca_certificate_is_installed_next_to_the_kubelet_config(clustered):
    kubelet = clustered.kubelets[0]
    files = {file.path: file for file in kubelet_files(kubelet, clustered)}
    assert files[kubelet.layout.ca_cert].content == CA_CERT
    assert BOOTSTRAP_TOKEN not in "".join(file.content for file in files.values())


def test_rendered_files_carry_no_secret(clustered):
    assert not [file.path for file in rendered_files(clustered) if BOOTSTRAP_TOKEN in file.content]


# ---------------------------------------------------------------- systemd-analyze verify


def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    assert path, "systemd-analyze is required (apt-get install systemd): unit files cannot be linted without it"
    return path


def install_binaries(directory: Path) -> dict[str, str]:
    """Executables at the paths the units start, so that systemd-analyze can resolve ExecStart."""
    directory.mkdir()
    paths = {}
    for key, name in (("kubeletPath", "kubelet"), ("containerdPath", "containerd")):
        binary = directory / name
        binary.write_text("#!/bin/sh\nexit 0\n")
        binary.chmod(0o755)
        paths[key] = str(binary)
    return paths


def install_units(plan: Plan, unit_dir: Path) -> list[Path]:
    """Writes every unit and drop-in as under /etc/systemd/system; returns the units (not drop-ins)."""
    units = []
    for file in rendered_files(plan):
        if not file.path.startswith(UNIT_DIR):
            continue
        target = unit_dir / file.path.removeprefix(UNIT_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(file.content)
        if target.parent == unit_dir:
            units.append(target)
    return sorted(units)


def verify_problems(unit_dir: Path, units: list[Path]) -> list[str]:
    """What `systemd-analyze verify` finds: it exits 0 on unknown keys, so any stderr line counts."""
    result = subprocess.run(
        [systemd_analyze(), "verify", *map(str, units)], capture_output=True, text=True, cwd=unit_dir, timeout=120
    )
    problems = result.stderr.splitlines()
    if result.returncode != 0:
        problems.append(f"exit status {result.returncode}")
    return problems


def three_numa_node_config(binaries: dict[str, str]) -> dict:
    nodes = [{"id": i, "cpus": f"{6 * i}-{6 * i + 5}"} for i in range(3)]
    kubelets = [{"numaNode": 2, "labels": {"numa-type": "green"}, "maxPods": 20}, {"numaNode": 0}, {"numaNode": 1}]
    host = origin_host(name="numa-c", numaNodes=nodes, systemCpus="0-1,6,12", kubelets=kubelets)
    return with_cluster(origin_config(hosts=[host], **binaries))


@pytest.fixture
def binaries(tmp_path) -> dict[str, str]:
    return install_binaries(tmp_path / "bin")


def test_origin_units_pass_systemd_analyze_verify(tmp_path, binaries):
    units = install_units(plan_of(origin_config(**binaries)), tmp_path / "units")
    assert [unit.name for unit in units] == [
        "containerd@numa0.service",
        "containerd@numa1.service",
        "kubelet@numa0.service",
        "kubelet@numa1.service",
        "numa0.slice",
        "numa1.slice",
    ]
    assert verify_problems(tmp_path / "units", units) == []


def test_three_numa_node_units_pass_systemd_analyze_verify(tmp_path, binaries):
    units = install_units(plan_of(three_numa_node_config(binaries)), tmp_path / "units")
    assert len(units) == 9
    assert verify_problems(tmp_path / "units", units) == []


@pytest.mark.parametrize(
    ("file", "old", "new", "complaint"),
    [
        ("numa0.slice", "AllowedCPUs=1-3\n", "AllowedCPU=1-3\n", "Unknown key"),
        ("numa1.slice", "AllowedCPUs=5-7\n", "AllowedCPUs=5-x\n", "Failed to parse"),
        ("system.slice.d/50-numa-kubelets.conf", "AllowedMemoryNodes=", "AllowedMemoryNode=", "Unknown key"),
        ("containerd@numa1.service", "Delegate=yes\n", "ExecStartPost=relative/path\n", "nor an absolute path"),
        ("kubelet@numa0.service", "/usr/bin/unshare ", "/usr/bin/no-such-unshare ", "is not executable"),
    ],
    ids=["unknown key", "unparsable cpulist", "drop-in unknown key", "relative command", "missing binary"],
)
def test_systemd_analyze_check_catches_a_broken_unit(tmp_path, binaries, file, old, new, complaint):
    unit_dir = tmp_path / "units"
    units = install_units(plan_of(origin_config(**binaries)), unit_dir)
    broken = unit_dir / file
    assert old in broken.read_text()
    broken.write_text(broken.read_text().replace(old, new))
    problems = verify_problems(unit_dir, units)
    assert any(complaint in line for line in problems), problems


def test_the_fast_yaml_writer_writes_what_the_pure_python_one_writes(clustered):
    """A different byte would change a rendered file, so every host's command would update."""
    assert render_module._DUMPER is yaml.CSafeDumper  # PyYAML's wheels ship libyaml
    documents = []
    for kubelet in clustered.kubelets:
        for token in (BOOTSTRAP_TOKEN, "123456.1234567890123456"):  # the second reads as a float: quoted
            documents.append(yaml.safe_load(bootstrap_kubeconfig(kubelet, clustered.cluster, token).content))
        documents.append(yaml.safe_load(kubelet_config(kubelet, clustered.cluster).content))
    for document in documents:
        assert render_module._yaml(document) == yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
    assert "'123456.1234567890123456'" in render_module._yaml(documents[1])


def test_the_kubelets_of_all_numa_nodes_record_the_root_controllers_at_once(tmp_path):
    """On a host's first start every kubelet's prepare script records the root cgroup's controllers
    at the same moment (seen failing under the real engine: one script's mv took the other's
    temporary file). Run side by side, again and again, both succeed and the record is right."""
    cgroup_fs, record = tmp_path / "cgroup", tmp_path / "run/root-controllers"
    for name in ("numa0.slice", "numa1.slice"):
        (cgroup_fs / name).mkdir(parents=True)
        (cgroup_fs / name / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids\n")
    (cgroup_fs / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids\n")
    scripts = [cgroup_controllers_shell(name, str(cgroup_fs), str(record)) for name in ("numa0.slice", "numa1.slice")]
    for _ in range(40):
        (cgroup_fs / "cgroup.subtree_control").write_text("cpuset cpu io memory pids\n")
        record.unlink(missing_ok=True)
        runs = [subprocess.Popen(["sh", "-eu", "-c", script], stderr=subprocess.PIPE, text=True) for script in scripts]
        for run in runs:
            _, stderr = run.communicate(timeout=30)
            assert run.returncode == 0, stderr
        # (A regular file stands for cgroup.subtree_control: the other script's "+hugetlb" may have
        # replaced it before this one read it, which the kernel's file would add to instead.)
        assert record.read_text() in ("cpuset cpu io memory pids\n", "+hugetlb\n")
