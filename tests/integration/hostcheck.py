"""Reads what matters on the test host: cpusets, unit state, processes and their cgroups."""

from __future__ import annotations

import shlex

q = shlex.quote


class HostView:
    def __init__(self, host) -> None:
        self.host = host

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
