"""Reads what matters on the test host: cpusets, unit state, processes and their cgroups."""

from __future__ import annotations

import shlex

q = shlex.quote


# The dev stack's (the origin machine's) units, and what its `up` lays on the host and its
# destroy must take away.
DEV_STACK_UNITS = (
    "containerd@numa0.service",
    "kubelet@numa0.service",
    "containerd@numa1.service",
    "kubelet@numa1.service",
)
DEV_STACK_CREATED_PATHS = (
    "/etc/systemd/system/numa0.slice",
    "/etc/systemd/system/numa1.slice",
    "/etc/systemd/system/kubelet@numa0.service",
    "/etc/systemd/system/containerd@numa1.service",
    "/etc/systemd/system/system.slice.d/50-numa-kubelets.conf",
    "/etc/systemd/system/init.scope.d/50-numa-kubelets.conf",
    "/etc/systemd/system/user.slice.d/50-numa-kubelets.conf",
    "/etc/numa-kubelets",
    "/var/lib/kubelet-numa0",
    "/var/lib/kubelet-numa1",
    "/var/lib/containerd-numa0",
    "/run/containerd-numa1",
    "/var/log/pods-numa0",
    "/run/numa-kubelets",
)


class HostView:
    def __init__(self, host) -> None:
        self.host = host

    def assert_runtimes_and_kubelets_confined(self, cpus_by_numa: dict[int, str]) -> None:
        """Each NUMA node's containerd@ and kubelet@ run in its slice, on its CPUs and memory node."""
        for numa, cpus in cpus_by_numa.items():
            for unit in (f"containerd@numa{numa}.service", f"kubelet@numa{numa}.service"):
                assert self.active(unit), unit
                pid = self.main_pid(unit)
                assert self.cgroup_of(pid) == f"/numa{numa}.slice/{unit}"
                assert self.process_status(pid) == {"Cpus_allowed_list": cpus, "Mems_allowed_list": str(numa)}

    def sh(self, script: str) -> str:
        return self.host.run(script).stdout.strip()

    def effective(self, cgroup: str, what: str) -> str:
        return self.sh(f"cat /sys/fs/cgroup/{cgroup}/cpuset.{what}.effective")

    def exists(self, path: str) -> bool:
        return self.host.run(f"test -e {q(path)}", check=False).rc == 0

    def unit(self, unit: str, *properties: str) -> dict[str, str]:
        flags = " ".join(f"-p {p}" for p in properties)
        lines = self.sh(f"systemctl show {flags} {q(unit)}").splitlines()
        return dict(line.split("=", 1) for line in lines)

    def started_at(self, unit: str) -> str:
        return self.unit(unit, "ActiveEnterTimestampMonotonic")["ActiveEnterTimestampMonotonic"]

    def active(self, unit: str) -> bool:
        return self.host.run(f"systemctl is-active --quiet {q(unit)}", check=False).rc == 0

    def process_status(self, pid: int | str) -> dict[str, str]:
        status = self.sh(f"grep -E '^(Cpus|Mems)_allowed_list' /proc/{int(pid)}/status")
        return {k: v.strip() for k, v in (line.split(":", 1) for line in status.splitlines())}

    def main_pid(self, unit: str) -> int:
        return int(self.unit(unit, "MainPID")["MainPID"])

    def cgroup_of(self, pid: int) -> str:
        return self.sh(f"cat /proc/{int(pid)}/cgroup").split("::", 1)[1]

    def runtime_control_dropins(self) -> str:
        """What `systemctl set-property --runtime` left under /run (empty when nothing)."""
        return self.sh("find /run/systemd/system.control -mindepth 1 2>/dev/null || true")

    def pid_of(self, process: str) -> int:
        return int(self.sh(f"pgrep -o -x {q(process)}"))
