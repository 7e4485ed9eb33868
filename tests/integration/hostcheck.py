"""Reads what matters on the test host: cpusets, unit state, the kubelet stand-in's record."""

from __future__ import annotations

import json
import shlex
import time

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

    def kubelet_record(self, numa: int, timeout: float = 90.0) -> dict:
        """What the running kubelet@numa<N> stand-in recorded. The unit is Type=simple, so
        `systemctl restart` returns before the new process has written its record: wait for the
        record of the unit's current main process."""
        unit, path = f"kubelet@numa{numa}.service", f"/var/lib/kubelet-numa{numa}/standin-record.json"
        deadline = time.monotonic() + timeout
        while True:
            main_pid = self.main_pid(unit)
            text = self.host.run(f"cat {q(path)}", check=False).stdout
            record = json.loads(text) if text.strip() else {}
            if main_pid and record.get("pid") == main_pid:
                return record
            if time.monotonic() > deadline:
                raise AssertionError(f"{path}: no record of {unit}'s main process {main_pid} after {timeout}s")
            time.sleep(1)

    def runtime_control_dropins(self) -> str:
        """What `systemctl set-property --runtime` left under /run (empty when nothing)."""
        return self.sh("find /run/systemd/system.control -mindepth 1 2>/dev/null || true")

    def pid_of(self, process: str) -> int:
        return int(self.sh(f"pgrep -o -x {q(process)}"))
