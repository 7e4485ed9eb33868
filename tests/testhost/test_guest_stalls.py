"""The stall reports a failing SSH quotes from the guest's serial console (tools.guest_stalls)."""

from pathlib import Path

from .tools import guest_stalls

# The lines as the kernel prints them (kernel/watchdog.c, kernel/rcu/tree_stall.h), amid a boot.
CONSOLE = """\
[    0.000000] Linux version 6.1.0-28-cloud-amd64 (debian-kernel@lists.debian.org)
[    2.104553] systemd[1]: Started ssh.service - OpenBSD Secure Shell server.
[  371.882311] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
[  371.882990] rcu: \t2-...!: (1 GPs behind) idle=0c4c/1/0x4000000000000000 softirq=34127/34128 fqs=1
[  396.104772] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kubelet:2210]
[  396.105120] Modules linked in: veth nft_chain_nat overlay
[  424.104772] watchdog: BUG: soft lockup - CPU#3 stuck for 48s! [containerd:1934]
"""


def test_the_kernels_stall_reports_are_quoted_in_order(tmp_path: Path) -> None:
    log = tmp_path / "serial.log"
    log.write_text(CONSOLE)
    assert guest_stalls(log) == [
        "[  371.882311] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
        "[  396.104772] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kubelet:2210]",
        "[  424.104772] watchdog: BUG: soft lockup - CPU#3 stuck for 48s! [containerd:1934]",
    ]
    assert len(guest_stalls(log, limit=1)) == 1


def test_a_healthy_console_or_none_has_no_stall(tmp_path: Path) -> None:
    log = tmp_path / "serial.log"
    log.write_text(CONSOLE.split("[  371")[0])
    assert guest_stalls(log) == []
    assert guest_stalls(tmp_path / "absent.log") == []
