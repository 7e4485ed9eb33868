"""The shell scripts run on a host: syntax, lint, secrets, and the prelude's `write_file`."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from numa_kubelets.plan import SHARED_DEVICE_PLUGINS_DIR, Plan
from numa_kubelets.render import HOST_SERVICE_UNITS, bootstrap_kubeconfig
from numa_kubelets.scripts import (
    PRELUDE,
    READ_STDIN_TO_THE_END,
    RUNTIME_CONTROL_DIR,
    bootstrap_kubeconfig_stdin,
    script_on_stdin,
)
from tests.unit.builders import (
    BOOTSTRAP_TOKEN,
    host_scripts,
    namespace_host,
    origin_config,
    origin_host,
    plan_of,
    rendered_files,
    with_cluster,
)

SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LXNzaC1rZXktbWF0ZXJpYWw=\n-----END OPENSSH PRIVATE KEY-----\n"
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user: {token: kubeconfig-secret-0123456789}\n"
SHELLS = ["bash", "dash"]
NVME_DEVICE = {"class": "0x010802", "vendor": "0x1b36", "device": "0x0010", "driver": "nvme"}


def cluster_config(**host: object) -> dict:
    """A cluster member with every secret set; host keys override the origin host."""
    nodes = [{"id": i, "cpus": f"{4 * i}-{4 * i + 3}"} for i in range(3)]
    config = with_cluster(origin_config(hosts=[origin_host(numaNodes=nodes, **host)]))
    return {**config, "sshPrivateKey": SSH_KEY, "kubeconfig": KUBECONFIG}


PLANS = {
    "origin": plan_of(origin_config()),
    "cluster": plan_of(cluster_config()),
    "cluster via sudo": plan_of(cluster_config(user="admin")),
    "namespace macvlan": plan_of(origin_config(hosts=[namespace_host()])),
    "namespace ipvlan": plan_of(origin_config(hosts=[namespace_host("ipvlan")])),
    "namespace device": plan_of(with_cluster(origin_config(hosts=[namespace_host("device")]))),
    # NVMe drives on both NUMA nodes, advertised by each kubelet's generic device plugin.
    "devices": plan_of(
        origin_config(
            hosts=[
                origin_host(
                    numaNodes=[
                        {"id": 0, "cpus": "0-3", "pciDevices": [NVME_DEVICE | {"address": "0000:01:00.0"}]},
                        {"id": 1, "cpus": "4-7", "pciDevices": [NVME_DEVICE | {"address": "0000:41:00.0"}]},
                    ]
                )
            ],
            devices=[{"resource": "example.com/nvme", "select": {"class": "0x0108"}, "deviceNodes": ["/dev/nvme*"]}],
        )
    ),
}


def all_scripts(plan: Plan) -> list[tuple[str, str]]:
    """Every script as the shell gets it: the command line, or what it reads on stdin."""
    return [
        (f"{name} {kind}", scripts.stdin if kind == "apply" and scripts.stdin is not None else getattr(scripts, kind))
        for name, scripts in host_scripts(plan).items()
        for kind in ("apply", "delete")
    ]


SCRIPTS = [(f"{plan_name}: {name}", text) for plan_name, plan in PLANS.items() for name, text in all_scripts(plan)]


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is required to check the generated scripts (apt-get install {name})"
    return path


def sudo_inner(script: str) -> str:
    """The script a non-root user runs through `sudo -n /bin/sh -c`."""
    words = shlex.split(script)
    assert words[:4] == ["sudo", "-n", "/bin/sh", "-c"] and len(words) == 5
    return words[4]


def run_shell(shell: str, script: str, directory: Path, stdin: str = "") -> subprocess.CompletedProcess:
    path = directory / "script.sh"
    path.write_text(script)
    return subprocess.run([tool(shell), str(path)], input=stdin, capture_output=True, text=True, timeout=60)


# ---------------------------------------------------------------- syntax and lint


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("script", [text for _, text in SCRIPTS], ids=[name for name, _ in SCRIPTS])
def test_script_parses(tmp_path, shell, script):
    texts = [script, sudo_inner(script)] if script.startswith("sudo ") else [script]
    for text in texts:
        path = tmp_path / "script.sh"
        path.write_text(text)
        result = subprocess.run([tool(shell), "-n", str(path)], capture_output=True, text=True)
        assert (result.returncode, result.stderr) == (0, ""), text


@pytest.mark.parametrize("script", [text for _, text in SCRIPTS], ids=[name for name, _ in SCRIPTS])
def test_script_passes_shellcheck(tmp_path, script):
    texts = [script, sudo_inner(script)] if script.startswith("sudo ") else [script]
    for text in texts:
        path = tmp_path / "script.sh"
        path.write_text(text)
        # POSIX sh: sudo runs the scripts with /bin/sh, which is dash on Debian.
        result = subprocess.run(
            [tool("shellcheck"), "--shell=sh", "--severity=warning", "--format=gcc", str(path)],
            capture_output=True,
            text=True,
        )
        assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), result.stdout


def test_rendered_host_side_scripts_pass_shellcheck(tmp_path):
    scripts = [file for file in rendered_files(PLANS["cluster"]) if file.content.startswith("#!/bin/sh\n")]
    # Per kubelet: the prepare scripts and the mount-namespace launchers of the kubelet and of containerd.
    assert len(scripts) == 12
    for file in scripts:
        path = tmp_path / "script.sh"
        path.write_text(file.content)
        result = subprocess.run(
            [tool("shellcheck"), "--severity=warning", "--format=gcc", str(path)], capture_output=True, text=True
        )
        assert (result.returncode, result.stdout) == (0, ""), result.stdout


def test_sudo_runs_exactly_the_root_script():
    as_root = dict(all_scripts(plan_of(cluster_config())))
    as_admin = dict(all_scripts(PLANS["cluster via sudo"]))
    assert as_root.keys() == as_admin.keys()
    for name, script in as_admin.items():
        assert (sudo_inner(script) if script.startswith("sudo ") else script) == as_root[name], name


def test_the_preflight_is_read_from_stdin_by_a_fixed_command_line():
    """pulumi-command's error repeats a failed command's command line: the preflight's is short."""
    for plan_name, command_line in (("cluster", "/bin/sh -s"), ("cluster via sudo", "sudo -n /bin/sh -s")):
        scripts = host_scripts(PLANS[plan_name])
        assert scripts["numa-a preflight"].apply == command_line
        stdin = scripts["numa-a preflight"].stdin
        assert stdin is not None and stdin.startswith("{\n# numa-kubelets: preflight of host numa-a\n")
        assert stdin.endswith("\n}\n")
        # Every other command keeps its scripts in its command lines (secret stdin, remove scripts).
        assert [name for name, each in scripts.items() if each.stdin is not None] == ["numa-a preflight"]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_script_on_stdin_is_read_whole_before_it_runs(tmp_path, shell):
    """A command in it that reads stdin gets nothing of the script (bash reads a script from a pipe
    a byte at a time: without the braces, `cat` would take the lines after it)."""
    script = script_on_stdin("root", 'set -eu\nread_by_cat=$(cat)\necho "cat read [$read_by_cat]"\necho after\n')
    assert script.apply == "/bin/sh -s" and script.stdin is not None
    result = subprocess.run([tool(shell), "-s"], input=script.stdin, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "cat read []\nafter\n", "")


# ---------------------------------------------------------------- secrets


@pytest.mark.parametrize("plan_name", ["cluster", "cluster via sudo"])
def test_no_secret_appears_in_any_script(plan_name):
    secrets = [
        BOOTSTRAP_TOKEN,
        BOOTSTRAP_TOKEN.split(".")[1],
        "c2VjcmV0LXNzaC1rZXktbWF0ZXJpYWw=",
        "kubeconfig-secret-0123456789",
    ]
    for name, text in all_scripts(PLANS[plan_name]):
        for secret in secrets:
            assert secret not in text, f"{name} contains a secret"


def test_the_token_travels_on_stdin_into_the_bootstrap_kubeconfig(tmp_path):
    plan = PLANS["cluster"]
    kubelet = plan.kubelets[0]
    apply = host_scripts(plan)[f"numa-a {kubelet.layout.instance} kubelet"].apply
    expected = bootstrap_kubeconfig(kubelet, plan.cluster, BOOTSTRAP_TOKEN)
    command = f"write_file {shlex.quote(expected.path)} 0600 {shlex.quote(kubelet.layout.kubelet_unit)}\n"
    assert command in apply.splitlines(keepends=True)
    target = tmp_path / "bootstrap-kubeconfig"
    retargeted = command.replace(shlex.quote(expected.path), shlex.quote(str(target)))
    stdin = bootstrap_kubeconfig_stdin(kubelet, plan, BOOTSTRAP_TOKEN)
    result = run_shell("dash", prelude_in(tmp_path) + retargeted, tmp_path, stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert target.read_bytes() == expected.content.encode()
    assert oct(target.stat().st_mode & 0o777) == "0o600"


# ---------------------------------------------------------------- cpusets applied live


def command_lines(script: str) -> list[list[str]]:
    lines = (line.strip() for line in script.splitlines())
    return [shlex.split(line) for line in lines if line.startswith(("systemctl ", "rm -f "))]


def live_cpuset_steps(script: str) -> dict[str, tuple[str, str]]:
    """unit -> (AllowedCPUs, AllowedMemoryNodes) of each `set-property --runtime` in the script, after
    checking that the runtime drop-ins it writes are removed again and a daemon-reload follows."""
    lines = command_lines(script)
    applied = {}
    for index, words in enumerate(lines):
        if words[:3] != ["systemctl", "set-property", "--runtime"]:
            continue
        unit, properties = words[3], dict(word.split("=", 1) for word in words[4:])
        assert sorted(properties) == ["AllowedCPUs", "AllowedMemoryNodes"], words
        later = lines[index + 1 :]
        removed = {path for line in later if line[:2] == ["rm", "-f"] for path in line[2:]}
        runtime_dropins = {f"{RUNTIME_CONTROL_DIR}/{unit}.d/50-{name}.conf" for name in properties}
        assert runtime_dropins <= removed, f"{unit}: set-property leaves {runtime_dropins - removed}"
        removal = next(i for i, line in enumerate(later) if runtime_dropins & set(line[2:]))
        assert ["systemctl", "daemon-reload"] in later[removal:], f"{unit}: no daemon-reload after the removal"
        applied[unit] = (properties["AllowedCPUs"], properties["AllowedMemoryNodes"])
    return applied


@pytest.mark.parametrize("plan_name", PLANS)
def test_every_runtime_dropin_set_property_writes_is_removed_again(plan_name):
    setting = [name for name, text in all_scripts(PLANS[plan_name]) if live_cpuset_steps(text)]
    assert "numa-a host services apply" in setting and "numa-a host services delete" in setting


def test_apply_sets_the_cpusets_live_and_destroy_lifts_them_live():
    """systemd 257 does not apply changed cpusets to running units on daemon-reload."""
    plan = PLANS["origin"]
    (host,) = plan.hosts
    scripts = host_scripts(plan)
    host_services = scripts[f"{host.name} host services"]
    system = (host.system_cpus.format(), host.system_mems.format())
    assert live_cpuset_steps(host_services.apply) == {unit.unit: system for unit in HOST_SERVICE_UNITS}
    assert live_cpuset_steps(host_services.delete) == {unit.unit: ("", "") for unit in HOST_SERVICE_UNITS}
    # The /etc drop-ins are gone before the lift and its reload, so nothing re-imposes them.
    delete_lines = command_lines(host_services.delete)
    first_lift = next(i for i, words in enumerate(delete_lines) if words[1:2] == ["set-property"])
    removed_before = {path for words in delete_lines[:first_lift] if words[:2] == ["rm", "-f"] for path in words[2:]}
    assert {unit.dropin_path for unit in HOST_SERVICE_UNITS} <= removed_before
    for kubelet in host.kubelets:
        slice_apply = scripts[f"{host.name} {kubelet.layout.instance} slice"].apply
        assert live_cpuset_steps(slice_apply) == {kubelet.layout.slice: (kubelet.cpus.format(), kubelet.mems.format())}


@pytest.mark.parametrize("script", [text for _, text in SCRIPTS], ids=[name for name, _ in SCRIPTS])
def test_every_script_reloads_systemd_at_most_once(script):
    """A daemon-reload reruns every generator: seconds on a loaded host, each time. `systemctl
    enable`/`disable` reload too unless told not to, or unless guarded to run only when needed."""
    lines = [line.strip() for line in script.splitlines()]
    assert sum(line == "systemctl daemon-reload" for line in lines) <= 1
    for line in lines:
        if not line.startswith("systemctl "):
            continue
        guarded = line.startswith("systemctl is-enabled --quiet ")
        words = shlex.split(line.split("||")[-1] if guarded else line.split("2>")[0])
        if words[:2] in (["systemctl", "enable"], ["systemctl", "disable"]) and "--no-reload" not in words:
            assert guarded, line


# ---------------------------------------------------------------- write_file and heredocs


def prelude_in(directory: Path) -> str:
    """The real prelude, with its pending markers kept under a test directory."""
    return PRELUDE + f"pending_dir={shlex.quote(str(directory / 'pending'))}\n"


@dataclass(frozen=True)
class WriteStep:
    path: str
    mode: str
    marker: str
    delimiter: str
    body: str

    def retargeted(self, root: Path) -> str:
        """The same step writing below `root`: only the path changes, the heredoc is the script's own."""
        command = " ".join(shlex.quote(word) for word in ("write_file", str(root) + self.path, self.mode, self.marker))
        return f"{command} <<'{self.delimiter}'\n{self.body}{self.delimiter}\n"


def write_steps(script: str) -> list[WriteStep]:
    """The `write_file ... <<'DELIMITER'` steps of an apply script, with their heredoc bodies."""
    steps = []
    lines = iter(script.splitlines(keepends=True))
    for line in lines:
        match = re.fullmatch(r"(write_file .*) <<'([A-Za-z0-9_]+)'\n", line)
        if not match:
            continue
        _, path, mode, marker = shlex.split(match.group(1))
        body = ""
        for body_line in lines:
            if body_line == match.group(2) + "\n":
                break
            body += body_line
        else:
            raise AssertionError(f"heredoc for {path} is not terminated")
        steps.append(WriteStep(path, mode, marker, match.group(2), body))
    return steps


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("plan_name", ["origin", "cluster"])
def test_every_rendered_file_round_trips_through_its_apply_script(tmp_path, shell, plan_name):
    plan = PLANS[plan_name]
    steps = [step for scripts in host_scripts(plan).values() for step in write_steps(scripts.apply)]
    files = rendered_files(plan)
    assert sorted(step.path for step in steps) == sorted(file.path for file in files), "each file written once"
    root = tmp_path / "root"
    script = prelude_in(tmp_path) + "".join(step.retargeted(root) for step in steps)
    result = run_shell(shell, script, tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    for file in files:
        written = Path(str(root) + file.path)
        assert written.read_bytes() == file.content.encode(), file.path
        assert written.stat().st_mode & 0o777 == int(file.mode, 8), file.path
    assert sorted(os.listdir(tmp_path / "pending")) == sorted({step.marker for step in steps})


@pytest.mark.parametrize("plan_name", ["origin", "cluster"])
def test_delete_scripts_remove_every_file_their_apply_script_writes(plan_name):
    for name, scripts in host_scripts(PLANS[plan_name]).items():
        for step in write_steps(scripts.apply):
            removal = rf"^rm -f .*{re.escape(shlex.quote(step.path))}"
            assert re.search(removal, scripts.delete, re.MULTILINE), (name, step.path)


def test_kubelet_apply_script_creates_both_ends_of_its_bind_mount():
    plan = PLANS["origin"]
    for kubelet in plan.kubelets:
        apply = host_scripts(plan)[f"numa-a {kubelet.layout.instance} kubelet"].apply
        mkdirs = [shlex.split(line)[2:] for line in apply.splitlines() if line.startswith("mkdir -p ")]
        created = {path for line in mkdirs for path in line}
        assert {kubelet.layout.device_plugins_dir, SHARED_DEVICE_PLUGINS_DIR, kubelet.layout.pod_logs_dir} <= created


def write(shell: str, directory: Path, target: Path, content: str, mode: str = "0644") -> None:
    script = prelude_in(directory) + f"write_file {shlex.quote(str(target))} {mode} demo-marker <<'END'\n{content}END\n"
    result = run_shell(shell, script, directory)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize("shell", SHELLS)
def test_write_file_writes_exact_bytes_and_mode(tmp_path, shell):
    target = tmp_path / "etc" / "new" / "file.conf"
    content = "literal $HOME `date` $(id) \\n 'quotes' \"double\"\n\tindented\n\n"
    write(shell, tmp_path, target, content, mode="0750")
    assert target.read_bytes() == content.encode()
    assert target.stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "pending" / "demo-marker").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_write_file_with_unchanged_content_touches_nothing(tmp_path, shell):
    target = tmp_path / "file.conf"
    marker = tmp_path / "pending" / "demo-marker"
    write(shell, tmp_path, target, "AllowedCPUs=1-3\n")
    marker.unlink()
    before = target.stat()
    write(shell, tmp_path, target, "AllowedCPUs=1-3\n")
    after = target.stat()
    assert not marker.exists()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(os.listdir(tmp_path)) == ["file.conf", "pending", "script.sh"], "no temporary file is left"


@pytest.mark.parametrize("shell", SHELLS)
def test_write_file_with_changed_content_replaces_the_file_and_leaves_the_marker(tmp_path, shell):
    target = tmp_path / "file.conf"
    marker = tmp_path / "pending" / "demo-marker"
    write(shell, tmp_path, target, "AllowedCPUs=1-3\n")
    marker.unlink()
    write(shell, tmp_path, target, "AllowedCPUs=1-2\n")
    assert marker.exists()
    assert target.read_text() == "AllowedCPUs=1-2\n"
    assert sorted(os.listdir(tmp_path)) == ["file.conf", "pending", "script.sh"], "no temporary file is left"


@pytest.mark.parametrize("shell", SHELLS)
def test_write_file_with_changed_mode_leaves_the_marker(tmp_path, shell):
    target = tmp_path / "reserve.sh"
    marker = tmp_path / "pending" / "demo-marker"
    write(shell, tmp_path, target, "#!/bin/sh\n", mode="0644")
    marker.unlink()
    write(shell, tmp_path, target, "#!/bin/sh\n", mode="0755")
    assert marker.exists()
    assert target.stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("plan_name", ["origin", "cluster"])
def test_a_kubelet_remove_script_given_the_bootstrap_kubeconfig_reads_it_away_first(plan_name):
    """With a cluster the kubelet's command has stdin, which pulumi-command gives its delete too:
    the script takes all of it before anything else (a command that exits without it can fail
    with EOF: READ_STDIN_TO_THE_END). Without a cluster there is no stdin to read."""
    plan = PLANS[plan_name]
    for kubelet in plan.kubelets:
        delete = host_scripts(plan)[f"numa-a {kubelet.layout.instance} kubelet"].delete
        body = delete.split(PRELUDE, 1)[1]
        assert body.startswith(READ_STDIN_TO_THE_END) == (plan.cluster is not None), body[:200]
