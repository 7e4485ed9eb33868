"""Shell scripts run on a host, as data: each resource gets an apply script and a remove script.

Rules every script follows:
- `set -eu`; every interpolated value is quoted with shlex.quote (values are validated too).
- File contents travel in quoted heredocs (no expansion); secrets only on stdin.
- Files are written atomically (temp file in the same directory, then rename) and only when
  their content or mode differs, so a second run changes nothing and restarts nothing.
- A change first leaves a restart marker under /run; the marker is cleared only after the
  restart succeeded, so a run interrupted midway converges on the next run.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shlex
from dataclasses import dataclass

from . import cluster, generic_plugin, network, reservations
from .plan import (
    POD_NETNS_DIR,
    POD_NETNS_MOUNT_MARKER,
    SHARED_CONTAINERD_RUN,
    SHARED_DEVICE_PLUGINS_DIR,
    UNSHARE,
    HostPlan,
    KubeletPlan,
    Plan,
)
from .render import (
    HOST_SERVICE_UNITS,
    HostFile,
    bootstrap_kubeconfig,
    containerd_files,
    host_service_dropins,
    kubelet_files,
    netns_files,
    register_taints_config,
    release_cgroup_controllers_shell,
    slice_unit,
    static_memory_extra,
)

MIN_SYSTEMD = 244
KUBELET_STARTED_PREFIX = "numa-kubelets: the kubelet runs since "
RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# containerd versions that read the version-2 config render.py writes (2.x migrates it on load).
SUPPORTED_CONTAINERD = ("1.6", "1.7", "2")
PENDING_DIR = "/run/numa-kubelets/pending"
# Where `systemctl set-property --runtime` writes its drop-ins.
RUNTIME_CONTROL_DIR = "/run/systemd/system.control"
q = shlex.quote

PRELUDE = f"""\
set -eu
umask 022
pending_dir={q(PENDING_DIR)}
tmp=
trap 'if [ -n "$tmp" ]; then rm -f "$tmp"; fi' EXIT
# write_file PATH MODE MARKER < content: atomic; on a change, leaves MARKER pending first.
write_file() {{
  mkdir -p "$(dirname "$1")"
  tmp=$(mktemp "$1.numa-kubelets.XXXXXX")
  cat > "$tmp"
  chmod "$2" "$tmp"
  if [ -f "$1" ] && [ "$(stat -c %a "$1")" = "$(stat -c %a "$tmp")" ] && cmp -s "$tmp" "$1"; then
    rm -f "$tmp"
  else
    mkdir -p "$pending_dir" && touch "$pending_dir/$3"
    mv -f "$tmp" "$1"
  fi
  tmp=
}}
is_pending() {{ [ -e "$pending_dir/$1" ]; }}
done_pending() {{ rm -f "$pending_dir/$1"; }}
# forget MARKER: for remove scripts; leaves no empty numa-kubelets directory behind in /run.
forget() {{ rm -f "$pending_dir/$1"; rmdir "$pending_dir" /run/numa-kubelets 2>/dev/null || true; }}
"""


@dataclass(frozen=True)
class HostScripts:
    """The apply script (create and update) and the remove script of one remote command.

    With `stdin`, `apply` is only a short fixed command line and the script is what it reads
    on stdin (see script_on_stdin)."""

    apply: str
    delete: str
    stdin: str | None = None


def _heredoc_delimiter(content: str) -> str:
    delimiter = "NUMA_KUBELETS_" + hashlib.sha256(content.encode()).hexdigest()[:16].upper()
    if delimiter in content.splitlines():
        raise ValueError("heredoc delimiter occurs in the content")  # impossible short of a hash collision
    return delimiter


def write_file_step(file: HostFile, marker: str) -> str:
    if not file.content.endswith("\n"):
        raise ValueError(f"{file.path}: content must end with a newline")
    delimiter = _heredoc_delimiter(file.content)
    return f"write_file {q(file.path)} {q(file.mode)} {q(marker)} <<'{delimiter}'\n{file.content}{delimiter}\n"


def _script(title: str, *steps: str) -> str:
    return f"# numa-kubelets: {title}\n" + PRELUDE + "".join(steps)


def _host_scripts(
    host: HostPlan, title: str, apply_steps: list[str], delete_title: str, delete_steps: list[str]
) -> HostScripts:
    return HostScripts(
        apply=run_as(host.user, _script(title, *apply_steps)),
        delete=run_as(host.user, _script(delete_title, *delete_steps)),
    )


def _stop_for_good(unit: str) -> str:
    """Disable and stop; the remove script's one daemon-reload at its end follows."""
    return (
        f"systemctl disable --no-reload --now {q(unit)} 2>/dev/null || true\n"
        f"systemctl reset-failed {q(unit)} 2>/dev/null || true\n"
    )


def run_as(user: str, script: str) -> str:
    """Scripts need root; a non-root SSH user goes through passwordless sudo."""
    if user == "root":
        return script
    return f"sudo -n /bin/sh -c {q(script)}"


# The command line of a script sent on stdin: pulumi-command's error for a failed command repeats
# the command line ("Process exited with status 1: running \"<command>\":" and the output), so a
# failure shows this short line and the script's own message, never a copy of the script.
SHELL_READING_STDIN = "/bin/sh -s"


def script_on_stdin(user: str, script: str) -> HostScripts:
    """A script that the shell reads from stdin, for a command with nothing to undo (no remove
    script) and no stdin of its own.

    A shell reading its script from a pipe reads it a command at a time (bash one byte at a time,
    so that a command it runs reads what follows it), so a command in the script that reads stdin
    would take the rest of the script as its input. In braces, the whole script is one compound
    command, parsed whole before any of it runs: what a command in it reads is at most the newline
    after the closing brace. Only for commands whose stdin carries nothing else: a secret stdin
    (the kubelet's bootstrap kubeconfig) would hide the script in a preview's diff; and a command
    with a remove script, which pulumi-command runs with the stdin of the last apply, keeps its
    scripts in its command lines.
    """
    if not script.endswith("\n"):
        raise ValueError("a script on stdin must end with a newline")
    return HostScripts(apply=run_as_reading_stdin(user), delete="true", stdin="{\n" + script + "}\n")


def run_as_reading_stdin(user: str) -> str:
    return SHELL_READING_STDIN if user == "root" else f"sudo -n {SHELL_READING_STDIN}"


# ---------------------------------------------------------------- preflight


def preflight_scripts(host: HostPlan, plan: Plan) -> HostScripts:
    declared_ids = " ".join(str(node_id) for node_id, _ in host.numa_nodes)
    checks = [
        "problems=\n",
        'fail() { problems="$problems\n  - $*"; }\n',
        'if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then\n'
        '  fail "cgroup v2 (unified hierarchy) is required; /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup) (boot with systemd.unified_cgroup_hierarchy=1)"\n'
        "elif ! grep -qw cpuset /sys/fs/cgroup/cgroup.controllers; then\n"
        '  fail "the cgroup v2 cpuset controller is not available"\n'
        "fi\n",
        "systemd_version=$(systemctl --version | awk 'NR == 1 { print $2 }')\n",
        f'case "$systemd_version" in (*[!0-9]*|"") systemd_version=0;; esac\n'
        f'if [ "$systemd_version" -lt {MIN_SYSTEMD} ]; then fail "systemd $systemd_version is too old: AllowedCPUs= needs systemd >= {MIN_SYSTEMD}"; fi\n',
        f"for binary in {' '.join(q(path) for path, _ in kubelet_binaries(host))} {q(plan.containerd_path)} {q(UNSHARE)}; do\n"
        '  if [ ! -x "$binary" ]; then fail "$binary is missing or not executable"; fi\n'
        "done\n",
        'if ! command -v runc >/dev/null 2>&1; then fail "runc is not installed (containerd needs it)"; fi\n',
        _containerd_version_check(plan.containerd_path),
        *(kubelet_version_check(path, version) for path, version in kubelet_binaries(host)),
        "for tool in flock mountpoint findmnt; do\n"
        '  if ! command -v "$tool" >/dev/null 2>&1; then fail "$tool (util-linux) is not installed"; fi\n'
        "done\n",
        f"declared={q(declared_ids)}\n",
        "present=$(cd /sys/devices/system/node && ls -d node[0-9]* 2>/dev/null | sed 's/^node//' | sort -n | tr '\\n' ' ' | sed 's/ $//')\n",
        'if [ "$present" != "$declared" ]; then fail "NUMA nodes on the host are [$present], the configuration declares [$declared] (run discover)"; fi\n',
    ]
    for node_id, cpus in host.numa_nodes:
        cpulist = f"/sys/devices/system/node/node{node_id}/cpulist"
        checks.append(
            f"actual=$(cat {q(cpulist)} 2>/dev/null || echo missing)\n"
            f"if [ \"$actual\" != {q(cpus.format())} ]; then fail \"NUMA node {node_id} has cpus '$actual' on the host, the configuration declares '{cpus.format()}'\"; fi\n"
        )
    checks.append(
        f'if [ "$(cat /sys/devices/system/cpu/online)" != {q(host.online_cpus.format())} ]; then '
        f'fail "online CPUs are $(cat /sys/devices/system/cpu/online), the configuration declares {host.online_cpus.format()}"; fi\n'
    )
    checks.extend(network.preflight_checks(tuple(k.network for k in host.kubelets if k.network is not None)))
    checks.extend(pci_device_checks(host))
    checks.extend(generic_plugin_binary_checks(host))
    if plan.cluster is not None:
        checks.extend(cluster.api_server_preflight(plan.cluster))
    checks.append(
        'if [ -n "$problems" ]; then\n'
        f'  printf "numa-kubelets preflight failed on host %s:%s\\n" {q(host.name)} "$problems" >&2\n'
        "  exit 1\n"
        "fi\n"
        f"echo {q(f'numa-kubelets preflight passed on host {host.name}')}"
        ' "(systemd $systemd_version, containerd $containerd_version, $runc_version)"\n'
    )
    # The preflight changes nothing, so the marker/atomic-write prelude is not needed.
    create = f"# numa-kubelets: preflight of host {host.name}\nset -eu\n" + "".join(checks)
    # On stdin: a failed preflight's error is its list of problems, not a copy of this script.
    return script_on_stdin(host.user, create)


# check_pci ADDRESS NUMA_NODE CLASS VENDOR DEVICE DRIVER WHAT: one declared PCI device against
# sysfs ("" DRIVER: not checked); WHAT names the device in each message.
CHECK_PCI_FUNCTION = r"""check_pci() {
  dir=/sys/bus/pci/devices/$1
  if [ ! -e "$dir" ]; then fail "$7 is missing (run discover)"; return; fi
  found=$(cat "$dir/numa_node" 2>/dev/null || echo unreadable)
  if [ "$found" != "$2" ]; then fail "$7 is on NUMA node $found, the configuration declares $2"; fi
  found=$(cat "$dir/class" 2>/dev/null || echo unreadable)
  if [ "$found" != "$3" ]; then fail "$7 is of class $found, the configuration declares $3"; fi
  found=$(cat "$dir/vendor" 2>/dev/null || echo unreadable)
  if [ "$found" != "$4" ]; then fail "$7 has vendor $found, the configuration declares $4"; fi
  found=$(cat "$dir/device" 2>/dev/null || echo unreadable)
  if [ "$found" != "$5" ]; then fail "$7 has device id $found, the configuration declares $5"; fi
  if [ -n "$6" ]; then
    found=$(basename "$(readlink "$dir/driver" 2>/dev/null || echo none)")
    if [ "$found" != "$6" ]; then fail "$7 is bound to driver $found, the configuration declares $6"; fi
  fi
}
"""


def pci_device_checks(host: HostPlan) -> list[str]:
    """Each declared PCI device on the host as declared: present, on its NUMA node (-1: none), of
    its class, vendor and device id, bound to its driver when one is declared; one message per
    finding, naming the device, its NUMA node and the kubelet it is for. Nothing for a host that
    declares no device, so such a host's preflight stays as it was."""
    if not host.pci_devices:
        return []
    offered_by = {address: k.node_name for k in host.kubelets for r in k.devices for address in r.addresses}
    steps = [CHECK_PCI_FUNCTION]
    for device in host.pci_devices:
        kubelet = offered_by.get(device.address)
        what = f"PCI device {device.address} of host {host.name} ({device.numa_text}, " + (
            f"for kubelet {kubelet})" if kubelet else "offered by no kubelet)"
        )
        node = "-1" if device.numa_node is None else str(device.numa_node)
        arguments = (device.address, node, device.pci_class, device.vendor, device.device, device.driver or "", what)
        steps.append("check_pci " + " ".join(q(argument) for argument in arguments) + "\n")
    return steps


def generic_plugin_binary_checks(host: HostPlan) -> list[str]:
    """The generic device plugin binary of each kubelet that runs one; nothing on other hosts, so
    their preflight stays as it was."""
    paths = sorted({k.generic_device_plugin_path for k in host.kubelets if k.generic_plugins})
    return [
        f'if [ ! -f {q(path)} ] || [ ! -x {q(path)} ]; then fail "{path} (the generic device plugin) is missing or '
        'not an executable file"; fi\n'
        for path in paths
    ]


def _containerd_version_check(containerd_path: str) -> str:
    """Sets containerd_version and runc_version (reported by the preflight); fails on a containerd
    that may not read the rendered config. Debian prints `1.6.20~ds1`, upstream `v1.7.24`."""
    patterns = "|".join(f"{version}.*" for version in SUPPORTED_CONTAINERD)
    supported = ", ".join(f"{version}.x" for version in SUPPORTED_CONTAINERD)
    return (
        f"containerd_version=$({q(containerd_path)} --version 2>/dev/null | awk 'NR == 1 {{ print $3 }}' || true)\n"
        "containerd_version=${containerd_version#v}\n"
        'case "$containerd_version" in\n'
        f"  ({patterns}) ;;\n"
        # A missing binary is reported above; an unreadable version only for a binary that is there.
        f'  ("") if [ -x {q(containerd_path)} ]; then fail "cannot tell the version of {containerd_path}"; fi\n'
        "       containerd_version=unknown;;\n"
        f'  (*) fail "containerd $containerd_version is not supported: the rendered config is read by containerd {supported}";;\n'
        "esac\n"
        "runc_version=$(runc --version 2>/dev/null | awk 'NR == 1 { print $1 \" \" $3 }' || true)\n"
    )


def kubelet_binaries(host: HostPlan) -> list[tuple[str, str]]:
    """Each kubelet binary of the host with the newest kubeletVersion it must serve, by path."""
    newest: dict[str, str] = {}
    for kubelet in host.kubelets:
        known = newest.get(kubelet.kubelet_path)
        if known is None or _minor(kubelet.kubelet_version) > _minor(known):
            newest[kubelet.kubelet_path] = kubelet.kubelet_version
    return sorted(newest.items())


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def kubelet_version_check(kubelet_path: str, kubelet_version: str) -> str:
    """A kubelet binary must have every option its kubelets' declared kubeletVersion allows."""
    major, minor = kubelet_version.split(".")
    kubelet = q(kubelet_path)
    return (
        f"if [ -x {kubelet} ]; then\n"
        f"  kubelet_version=$({kubelet} --version 2>/dev/null | awk '{{ print $2 }}' || true)\n"
        f"  kubelet_minor=$(echo \"$kubelet_version\" | sed -n 's/^v{int(major)}\\.\\([0-9][0-9]*\\)\\..*/\\1/p')\n"
        '  if [ -z "$kubelet_minor" ]; then\n'
        # A plain absolute path (config.AbsolutePath): safe inside double quotes.
        f"    fail \"cannot tell the version of {kubelet_path} (--version says '$kubelet_version')\"\n"
        f'  elif [ "$kubelet_minor" -lt {int(minor)} ]; then\n'
        f'    fail "kubelet $kubelet_version at {kubelet_path} is older than its kubeletVersion {kubelet_version}"\n'
        "  fi\n"
        "fi\n"
    )


# ---------------------------------------------------------------- host services


def _check_cpuset(cgroup: str, expected: str, what: str) -> str:
    """Fail unless the cgroup's effective cpuset is what was asked for."""
    path = f"/sys/fs/cgroup/{cgroup}/cpuset.{what}.effective"
    return (
        f'if [ -e {q(path)} ] && [ "$(cat {q(path)})" != {q(expected)} ]; then\n'
        f'  echo "numa-kubelets: {cgroup} has {what} $(cat {q(path)}), expected {expected}" >&2; exit 1\n'
        "fi\n"
    )


def _runtime_control_dir(unit: str) -> str:
    return f"{RUNTIME_CONTROL_DIR}/{unit}.d"


def _set_cpusets_live_and_reload(cpusets: list[tuple[str, str, str]]) -> str:
    """(unit, cpus, mems) made live on each running unit, then the one daemon-reload.

    systemd 257 no longer applies a changed AllowedCPUs=/AllowedMemoryNodes= to a running unit on
    daemon-reload (252 did); `set-property --runtime` applies it at once on every version >= 244.
    Its runtime drop-ins would shadow the persistent ones under /etc until the next boot, so they
    go again before the reload, which leaves the units reading their settings from /etc alone.
    A unit that is not running gets its settings when it starts. An empty cpus/mems lifts the
    restriction. Each daemon-reload reruns every generator (seconds on a busy host): one per script.
    """
    steps = []
    for unit, cpus, mems in cpusets:
        control = _runtime_control_dir(unit)
        steps.append(
            f"if systemctl is-active --quiet {q(unit)}; then\n"
            f"  systemctl set-property --runtime {q(unit)} {q('AllowedCPUs=' + cpus)} {q('AllowedMemoryNodes=' + mems)}\n"
            f"  rm -f {q(control + '/50-AllowedCPUs.conf')} {q(control + '/50-AllowedMemoryNodes.conf')}\n"
            f"  rmdir {q(control)} {q(RUNTIME_CONTROL_DIR)} 2>/dev/null || true\n"
            "fi\n"
        )
    steps.append("systemctl daemon-reload\n")
    return "".join(steps)


def host_services_scripts(host: HostPlan) -> HostScripts:
    marker = "host-services"
    apply_steps = [write_file_step(file, marker) for file in host_service_dropins(host)]
    restrict = [(unit.unit, host.system_cpus.format(), host.system_mems.format()) for unit in HOST_SERVICE_UNITS]
    apply_steps.append(
        f"if is_pending {marker}; then\n{_set_cpusets_live_and_reload(restrict)}done_pending {marker}\nfi\n"
    )
    for unit in HOST_SERVICE_UNITS:
        apply_steps.append(_check_cpuset(unit.unit, host.system_cpus.format(), "cpus"))
    remove_steps = [f"rm -f {q(f.path)}\n" for f in host_service_dropins(host)]
    remove_steps += [f"rmdir {q(f.path.rsplit('/', 1)[0])} 2>/dev/null || true\n" for f in host_service_dropins(host)]
    remove_steps.append(f"forget {marker}\n")
    remove_steps.append(_set_cpusets_live_and_reload([(unit.unit, "", "") for unit in HOST_SERVICE_UNITS]))
    title = f"keep system.slice, init.scope and user.slice on CPUs {host.system_cpus} of host {host.name}"
    return _host_scripts(
        host, title, apply_steps, f"lift the CPU restriction of host services on {host.name}", remove_steps
    )


# ---------------------------------------------------------------- NUMA slice


def slice_scripts(host: HostPlan, kubelet: KubeletPlan) -> HostScripts:
    layout = kubelet.layout
    marker = layout.slice
    apply_steps = [
        write_file_step(slice_unit(kubelet), marker),
        f"if is_pending {q(marker)}; then\n"
        + _set_cpusets_live_and_reload([(layout.slice, kubelet.cpus.format(), kubelet.mems.format())])
        + f"done_pending {q(marker)}\nfi\n",
        f"systemctl start {q(layout.slice)}\n",
        _check_cpuset(layout.slice, kubelet.cpus.format(), "cpus"),
        _check_cpuset(layout.slice, kubelet.mems.format(), "mems"),
    ]
    remove_steps = [
        # Stops whatever still runs in the slice, pods included.
        f"systemctl stop {q(layout.slice)} 2>/dev/null || true\n",
        f"rm -f {q(layout.slice_path)}\n",
        # The last slice gone, no cgroup below the root uses what the kubelets needed turned on.
        "if ! ls /etc/systemd/system/numa[0-9]*.slice >/dev/null 2>&1; then\n"
        + release_cgroup_controllers_shell()
        + "fi\n",
        f"forget {q(marker)}\n",
        "systemctl daemon-reload\n",
    ]
    title = f"{layout.slice} on host {host.name}: CPUs {kubelet.cpus}, memory node {kubelet.mems}"
    return _host_scripts(host, title, apply_steps, f"remove {layout.slice} from host {host.name}", remove_steps)


# ---------------------------------------------------------------- container runtime


def _enable_and_start(unit: str) -> str:
    """Converges a unit someone disabled or stopped; `systemctl enable` alone would reload systemd."""
    return f"systemctl is-enabled --quiet {q(unit)} || systemctl enable --quiet {q(unit)}\nsystemctl start {q(unit)}\n"


def _restart_if_pending(unit: str) -> str:
    return (
        f"if is_pending {q(unit)}; then\n"
        f"  systemctl enable --quiet --no-reload {q(unit)}\n"
        "  systemctl daemon-reload\n"
        f"  systemctl restart {q(unit)}\n"
        f"  done_pending {q(unit)}\n"
        "fi\n" + _enable_and_start(unit)
    )


def _report_start_time(unit: str) -> str:
    """When the running kubelet started, on the host's clock (the one its Node's heartbeats use),
    as UTC RFC 3339: its NodeLifecycle waits for a Ready reported after that (cluster.py)."""
    return (
        f"started=$(systemctl show --value -p ActiveEnterTimestamp {q(unit)})\n"
        f'echo "{KUBELET_STARTED_PREFIX}$(date -u -d "$started" +%Y-%m-%dT%H:%M:%SZ)"\n'
    )


def parse_kubelet_started(stdout: str | None) -> str:
    """The start time a kubelet's apply script reported ("" when there is none)."""
    for line in (stdout or "").splitlines():
        if line.startswith(KUBELET_STARTED_PREFIX):
            started = line.removeprefix(KUBELET_STARTED_PREFIX).strip()
            return started if RFC3339_UTC.fullmatch(started) else ""
    return ""


def containerd_scripts(host: HostPlan, kubelet: KubeletPlan, plan: Plan) -> HostScripts:
    layout = kubelet.layout
    unit = layout.containerd_unit
    apply_steps = [f"mkdir -p {q(layout.containerd_root)}\n"]
    files = containerd_files(kubelet, plan)
    apply_steps += [write_file_step(file, unit) for file in files]
    apply_steps.append(_restart_if_pending(unit))
    kubepods = f"{layout.instance}-kubepods.slice"
    remove_steps = [
        _pod_leftovers(layout.containerd_socket, f"/sys/fs/cgroup/{layout.slice}/{kubepods}", plan.containerd_path),
        # Pods first: with KillMode=process, stopping containerd leaves shims and containers.
        _stop_pods(kubepods, f"/sys/fs/cgroup/{layout.slice}/{kubepods}"),
        _stop_for_good(unit),
        # Shims left behind by KillMode=process.
        f"systemctl kill --signal=KILL {q(unit)} 2>/dev/null || true\n",
        _unmount_below(layout.containerd_root),
        _unmount_below(layout.containerd_state),
        # Its pods' namespaces before its unit file: the instances are removed side by side, and
        # one that finds no other unit left must find their pods' namespaces gone too (seen under
        # the real engine: /run/netns stayed a mount point when the last check ran first).
        _remove_pod_netns(),
        f"rm -f {' '.join(q(file.path) for file in files)}\n",
        f"rm -rf {q(layout.containerd_root)} {q(layout.containerd_state)}\n",
        _last_runtime_restores_netns_dir(),
        f"rmdir {q(layout.config_dir)} /etc/numa-kubelets 2>/dev/null || true\n",
        # The mount point the prepare script made (a host's own containerd keeps it busy), and on
        # which every running instance's launcher binds its own run directory, in its own mount
        # namespace. Linux detaches the mounts on a directory removed in another namespace, so
        # removed while another instance runs, that instance would lose its run directory: its
        # shims' runc state gone, its containers never stopped (seen under the real engine, a
        # pod stuck terminating while the other NUMA node's runtime was removed). The last goes.
        _when_last_instance("containerd", f"rmdir {q(SHARED_CONTAINERD_RUN)} 2>/dev/null || true\n"),
        'for scope in $pod_scopes; do systemctl reset-failed "$scope" 2>/dev/null || true; done\n',
        f"forget {q(unit)}\n",
        "systemctl daemon-reload\n",
    ]
    title = f"{unit} on host {host.name}"
    return _host_scripts(host, title, apply_steps, f"remove {unit} and its state from host {host.name}", remove_steps)


def _when_last_instance(kind: str, step: str) -> str:
    """`step` only once no `kind`@numa<N> unit file is left on the host (each removal deletes its
    own first, so of instances removed side by side the last to look runs it)."""
    return f"if ! ls /etc/systemd/system/{kind}@numa*.service >/dev/null 2>&1; then\n  {step}fi\n"


def _last_runtime_restores_netns_dir() -> str:
    """The last containerd@ gone: /run/netns is no mount point again if its prepare script made it one.

    The other instances may be removed at the same moment: the lock their prepare scripts take."""
    return (
        "if ! ls /etc/systemd/system/containerd@numa*.service >/dev/null 2>&1; then\n"
        "  mkdir -p /run/numa-kubelets\n"
        "  exec 9>/run/numa-kubelets/netns.lock\n"
        "  flock 9\n"
        f'  if [ -e {POD_NETNS_MOUNT_MARKER} ] && [ -z "$(ls -A {POD_NETNS_DIR})" ]; then\n'
        f"    while mountpoint -q {POD_NETNS_DIR}; do umount {POD_NETNS_DIR}; done\n"
        f"    rmdir {POD_NETNS_DIR} 2>/dev/null || true\n"
        "  fi\n"
        f"  rm -f {POD_NETNS_MOUNT_MARKER} /run/numa-kubelets/netns.lock\n"
        "  exec 9>&-\n"
        "fi\n"
    )


POD_STOP_GRACE_SECONDS = 10


def _stop_pods(kubepods: str, kubepods_cgroup: str) -> str:
    """SIGTERM to every pod process, SIGKILL to what is left after a grace period, then stop.

    A plain `systemctl stop` waits TimeoutStopSec (90 s) per container scope whose PID 1 has no
    SIGTERM handler: the kernel drops that signal for a PID namespace's init (pid_namespaces(7))."""
    events = f"{kubepods_cgroup}/cgroup.events"
    return (
        f"if [ -e {q(events)} ]; then\n"
        f"  systemctl kill --signal=TERM {q(kubepods)} 2>/dev/null || true\n"
        f"  waited=0\n"
        f"  while ! grep -qx 'populated 0' {q(events)} 2>/dev/null && [ $waited -lt {POD_STOP_GRACE_SECONDS} ]; do\n"
        "    sleep 1; waited=$((waited + 1))\n"
        "  done\n"
        f"  systemctl kill --signal=KILL {q(kubepods)} 2>/dev/null || true\n"
        "fi\n"
        f"systemctl stop {q(kubepods)} 2>/dev/null || true\n"
    )


def _pod_leftovers(socket: str, kubepods_cgroup: str, containerd_path: str) -> str:
    """Sets pod_netns and pod_scopes: what the instance's pods leave outside its directories when
    they are killed without a kubelet's teardown. containerd records each sandbox's CNI network
    namespace (a bind mount under /var/run/netns); a killed container's scope stays a failed unit.
    Read before the pods are stopped; the CNI plugins' own state (IPAM leases) is not touched."""
    ctr = posixpath.join(posixpath.dirname(containerd_path), "ctr")
    sandboxes = 'labels."io.cri-containerd.kind"==sandbox'
    return (
        f"ctr={q(ctr)}\n"
        '[ -x "$ctr" ] || ctr=$(command -v ctr || true)\n'
        "pod_netns=\n"
        'if [ -n "$ctr" ]; then\n'
        f'  for id in $("$ctr" --address {q(socket)} -n k8s.io containers ls -q {q(sandboxes)} 2>/dev/null || true); do\n'
        f'    pod_netns="$pod_netns $("$ctr" --address {q(socket)} -n k8s.io containers info "$id" 2>/dev/null'
        " | grep -o '/var/run/netns/cni-[0-9a-f-]*' | head -n 1 || true)\"\n"
        "  done\n"
        "fi\n"
        f"pod_scopes=$(find {q(kubepods_cgroup)} -name '*.scope' -type d -exec basename {{}} \\; 2>/dev/null || true)\n"
    )


def _remove_pod_netns() -> str:
    """Removes the pods' network namespaces _pod_leftovers found, each one's veths first.

    Unmounting a namespace leaves the kernel to free it, and the host ends of its veths with it,
    asynchronously: seconds later on a busy machine, so a check right after the removal still
    saw them. Deleting a veth inside the namespace removes both ends at once. Only links inside a
    pod's namespace are touched, never one that turns out to be the host's own namespace."""
    return (
        "host_netns=$(stat -L -c %i /proc/1/ns/net)\n"
        "for netns in $pod_netns; do\n"
        '  if [ "$(stat -L -c %i "$netns" 2>/dev/null)" != "$host_netns" ] && nsenter --net="$netns" true 2>/dev/null; then\n'
        '    for link in $(nsenter --net="$netns" ip -o link show type veth'
        " | awk -F': ' '{sub(/@.*/, \"\", $2); print $2}'); do\n"
        '      nsenter --net="$netns" ip link delete "$link" 2>/dev/null || true\n'
        "    done\n"
        "  fi\n"
        '  umount "$netns" 2>/dev/null || true; rm -f "$netns"\n'
        "done\n"
    )


def _unmount_below(directory: str) -> str:
    """Unmount what containers left mounted under a directory, deepest first."""
    return (
        f"findmnt -rn -o TARGET | awk -v d={q(directory)} 'index($0, d \"/\") == 1' | sort -r | "
        'while read -r target; do umount -l "$target" || true; done\n'
    )


# ---------------------------------------------------------------- network namespace (namespace mode)


def netns_scripts(host: HostPlan, kubelet: KubeletPlan) -> HostScripts:
    """numa-netns@numa<N>.service and the private copies of the CNI agents' host paths.

    A change is applied in place (`systemctl reload` runs the idempotent up script again), so
    containerd and the kubelet, which require the unit, keep running.
    """
    kubelet_network = kubelet.network
    if kubelet_network is None:
        raise ValueError(f"{kubelet.node_name} is not in namespace mode")
    unit = kubelet_network.unit
    files = netns_files(kubelet_network)
    apply_steps = [write_file_step(file, unit) for file in files]
    apply_steps.append(
        f"if is_pending {q(unit)}; then\n"
        f"  systemctl enable --quiet --no-reload {q(unit)}\n"
        "  systemctl daemon-reload\n"
        f"  if systemctl is-active --quiet {q(unit)}; then systemctl reload {q(unit)}; fi\n"
        f"  done_pending {q(unit)}\n"
        "fi\n" + _enable_and_start(unit)
    )
    ns = q(kubelet_network.netns)
    remove_steps = [
        _stop_for_good(unit),
        # Also when the unit never ran its stop: nothing of ours stays in the host's tables.
        f"if [ -e {q(kubelet_network.netns_path)} ]; then /bin/sh {q(kubelet_network.down_script)} 2>/dev/null || "
        f"ip netns delete {ns}; fi\n",
        f"rm -f {' '.join(q(f.path) for f in files)}\n",
        f"rmdir {q(kubelet_network.netns_etc_resolv_conf.rsplit('/', 1)[0])} /etc/netns 2>/dev/null || true\n",
        f"rm -rf {q(kubelet_network.private_dir)}\n",
        network.remove_created_mount_points_shell(),
        f"rmdir {q(kubelet.layout.config_dir)} /etc/numa-kubelets 2>/dev/null || true\n",
        f"forget {q(unit)}\n",
        "systemctl daemon-reload\n",
    ]
    title = f"{unit} on host {host.name}: {kubelet_network.describe()}"
    return _host_scripts(host, title, apply_steps, f"remove {unit} from host {host.name}", remove_steps)


# ---------------------------------------------------------------- kubelet


def kubelet_scripts(host: HostPlan, kubelet: KubeletPlan, plan: Plan) -> HostScripts:
    """Installs the kubelet's files; with a cluster, the bootstrap kubeconfig arrives on stdin."""
    layout = kubelet.layout
    unit = layout.kubelet_unit
    apply_steps = [
        f"mkdir -p {q(layout.root_dir)} {q(layout.device_plugins_dir)} {q(layout.pod_logs_dir)} {q(SHARED_DEVICE_PLUGINS_DIR)}\n",
        f"chmod 0700 {q(layout.root_dir)}\n",
    ]
    if plan.cluster is not None:
        apply_steps.append(f"write_file {q(layout.bootstrap_kubeconfig)} 0600 {q(unit)}\n")
    files = kubelet_files(kubelet, plan)
    apply_steps += [write_file_step(file, unit) for file in files]
    # Its own marker, which nothing waits for: new taints need no restart (render.register_taints_config).
    taints = register_taints_config(kubelet)
    taints_marker = f"{unit}.taints"
    apply_steps.append(write_file_step(taints, taints_marker) + f"done_pending {q(taints_marker)}\n")
    apply_steps.append(_resource_manager_state_step(kubelet))
    apply_steps.append(_restart_if_pending(unit))
    apply_steps.append(_report_start_time(unit))
    remove_steps = [
        *([READ_STDIN_TO_THE_END] if plan.cluster is not None else []),
        _stop_for_good(unit),
        _unmount_below(layout.root_dir),
        f"rm -f {q(layout.kubelet_unit_path)}\n",
        f"rm -rf {q(layout.root_dir)} {q(layout.pod_logs_dir)} {q(layout.kubelet_config_dropin_dir.rsplit('/', 1)[0])}\n",
        f"rm -f {' '.join(q(f.path) for f in files)} {q(taints.path)} {q(layout.bootstrap_kubeconfig)}\n",
        # The last kubelet on the host takes the private mount point of the shared directory
        # along; the other kubelets may be removed at the same moment (their prepare scripts' lock).
        "if ! ls /etc/systemd/system/kubelet@numa*.service >/dev/null 2>&1; then\n"
        "  mkdir -p /run/numa-kubelets\n"
        "  exec 9>/run/numa-kubelets/device-plugins.lock\n"
        "  flock 9\n"
        f"  while mountpoint -q {q(SHARED_DEVICE_PLUGINS_DIR)}; do umount {q(SHARED_DEVICE_PLUGINS_DIR)}; done\n"
        # Each kubelet's launcher binds its own directory on it in its mount namespace: only the
        # last kubelet removes it (see the containerd removal's run directory for why).
        f"  rmdir {q(SHARED_DEVICE_PLUGINS_DIR)} /var/lib/kubelet 2>/dev/null || true\n"
        "  rm -f /run/numa-kubelets/device-plugins.lock\n"
        "  exec 9>&-\n"
        "fi\n",
        f"rmdir {q(layout.config_dir)} /etc/numa-kubelets 2>/dev/null || true\n",
        f"forget {q(unit)}\n",
        "systemctl daemon-reload\n",
    ]
    title = f"{unit} ({kubelet.node_name}) on host {host.name}"
    return _host_scripts(host, title, apply_steps, f"remove {unit} and its state from host {host.name}", remove_steps)


# pulumi-command runs `delete` with the stdin of the last apply (here the bootstrap kubeconfig).
# Its SSH client (golang.org/x/crypto/ssh) copies stdin while the command runs, and a command that
# exits before taking all of it fails with "EOF" now and then although it succeeded (seen with
# the real pulumi-command 1.2.1: tests/e2e/test_command_plugin.py). The apply script reads it
# (write_file); the remove script, which has no use for it, reads it away first.
READ_STDIN_TO_THE_END = "cat >/dev/null\n"


def _resource_manager_state_step(kubelet: KubeletPlan) -> str:
    """Reports the node's hugepage pools; removes state files the restarted kubelet would refuse.

    The memory reservation and what the memory manager's state belongs to depend on the host's
    memory and the node's pools, so they are computed here as at the kubelet's start. A running kubelet keeps writing its state, so it is stopped before a file
    goes; the restart marker then starts it with the new settings.
    """
    layout = kubelet.layout
    cpu_identity = kubelet.settings.cpu_manager_identity
    return (
        reservations.sysfs_variables()
        + reservations.reservation_shell(kubelet.numa_node, kubelet.host_numa_nodes, static_memory_extra(kubelet))
        + reservations.hugepage_report_shell(kubelet.numa_node)
        + f"echo 'numa-kubelets: {layout.kubelet_unit} reserves what lies outside its NUMA node, as of now:'\n"
        + reservations.dropin_shell(kubelet.reserved_cpus)
        + reservations.state_functions_shell(layout.root_dir)
        + f"if {reservations.managers_changed_shell(cpu_identity)}; then\n"
        + f"  systemctl stop {q(layout.kubelet_unit)} 2>/dev/null || true\n"
        + reservations.reconcile_managers_shell(layout.root_dir, cpu_identity)
        + f'  mkdir -p "$pending_dir" && touch "$pending_dir"/{q(layout.kubelet_unit)}\n'
        + "fi\n"
    )


def bootstrap_kubeconfig_stdin(kubelet: KubeletPlan, plan: Plan, token: str) -> str:
    """The kubelet installer's stdin: secret, never part of a command string."""
    assert plan.cluster is not None
    return bootstrap_kubeconfig(kubelet, plan.cluster, token).content


# ---------------------------------------------------------------- generic device plugins


def _remove_plugin_units(kubelet: KubeletPlan, keep: tuple[str, ...]) -> str:
    """Stops and removes this kubelet's plugin units other than `keep`, with their resolver and
    config; with `keep`, reloads systemd when it removed one (the remove script reloads anyway)."""
    layout = kubelet.layout
    prefix = f"{generic_plugin.UNIT_PREFIX}{layout.instance}-"
    kept = "|".join(q(unit) for unit in keep)
    return (
        ("removed=\n" if keep else "") + f"for path in {generic_plugin.unit_glob(kubelet)}; do\n"
        '  [ -e "$path" ] || continue\n'
        "  unit=${path##*/}\n"
        + (f'  case "$unit" in ({kept}) continue;; esac\n' if keep else "")
        + f"  key=${{unit#{prefix}}}; key=${{key%.service}}\n"
        '  systemctl disable --no-reload --now "$unit" 2>/dev/null || true\n'
        '  systemctl reset-failed "$unit" 2>/dev/null || true\n'
        f'  rm -f "$path" {q(layout.config_dir)}/device-plugin-"$key".sh '
        f'{q(generic_plugin.RUNTIME_DIR + "/" + layout.instance)}/device-plugin-"$key".yaml\n'
        '  done_pending "$unit"\n'
        + ("  removed=yes\n" if keep else "")
        + "done\n"
        + ('if [ -n "$removed" ]; then systemctl daemon-reload; fi\n' if keep else "")
    )


def device_plugin_scripts(host: HostPlan, kubelet: KubeletPlan) -> HostScripts:
    """The kubelet's generic device plugins: one unit per resource domain, each with the resolver
    that writes its config at start. A change of a plugin's files restarts that plugin alone (its
    own marker); units no longer planned go. The kubelet is never restarted: its restart revision
    (revision.py) covers none of these files."""
    plugins = kubelet.generic_plugins
    if not plugins:
        raise ValueError(f"{kubelet.node_name} runs no generic device plugin")
    units = generic_plugin.unit_names(kubelet)
    apply_steps = [_remove_plugin_units(kubelet, units)]
    for plugin, unit in zip(plugins, units, strict=True):
        apply_steps += [write_file_step(file, unit) for file in generic_plugin.plugin_files(kubelet, plugin)]
    apply_steps += [_restart_if_pending(unit) for unit in units]
    layout = kubelet.layout
    remove_steps = [
        _remove_plugin_units(kubelet, ()),
        f"rmdir {q(generic_plugin.RUNTIME_DIR + '/' + layout.instance)} 2>/dev/null || true\n",
        f"rmdir {q(layout.config_dir)} /etc/numa-kubelets 2>/dev/null || true\n",
        *(f"forget {q(unit)}\n" for unit in units),
        "systemctl daemon-reload\n",
    ]
    title = f"generic device plugins of {kubelet.node_name} on host {host.name}: {' '.join(units)}"
    return _host_scripts(
        host, title, apply_steps, f"remove the generic device plugins of {kubelet.node_name}", remove_steps
    )
