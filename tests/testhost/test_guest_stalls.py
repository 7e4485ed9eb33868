"""The stall reports a failing SSH quotes from the guest's serial console (tools.guest_stalls)."""

import time
from pathlib import Path

import pytest

from .tools import guest_panic, guest_stalls

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


# A boot of trixie's kernel under multi-threaded TCG (2026-12-06, a CI-like run), as it ended.
PANICKED_BOOT = """\
[    6.951520] sched_clock: Marking stable (6908918225, 41861828)->(9796295184, -2845515131)
[    6.966950] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[    6.967691] CPU: 5 UID: 0 PID: 0 Comm: swapper/5 Not tainted 6.12.118+deb13-cloud-amd64 #1  Debian 6.12.118-1
[    6.972359] RIP: 0010:sched_clock_idle_wakeup_event+0x5/0x40
[    6.990058] Kernel panic - not syncing: Fatal exception in interrupt
[    7.970682] Shutting down cpus with NMI
"""


def test_a_panicked_kernel_is_named_and_its_oops_quoted(tmp_path: Path) -> None:
    log = tmp_path / "serial.log"
    log.write_text(PANICKED_BOOT)
    assert guest_panic(log) == "[    6.990058] Kernel panic - not syncing: Fatal exception in interrupt"
    assert guest_stalls(log) == [
        "[    6.966950] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI",
        "[    6.990058] Kernel panic - not syncing: Fatal exception in interrupt",
    ]
    log.write_text(CONSOLE)
    assert guest_panic(log) is None
    assert guest_panic(tmp_path / "absent.log") is None


def test_a_boot_whose_console_falls_silent_is_reported_as_stalled(tmp_path: Path, monkeypatch) -> None:
    """host._wait_for_ssh raises GuestPanicked (booted again by host.boot) when the console stops
    growing before SSH answers: here a console that never grows, and a port where nothing listens."""
    from . import host as host_module
    from .host import GuestPanicked, _wait_for_ssh

    log = tmp_path / "serial.log"
    log.write_text("[    0.000000] Linux version 6.1.0-28-cloud-amd64\n")

    class SilentGuest:
        serial_log = log
        port = 9  # discard: nothing answers SSH there

        def is_running(self) -> bool:
            return True

    monkeypatch.setattr(host_module, "SILENT_CONSOLE_SECONDS", 1.0)
    started = time.monotonic()
    with pytest.raises(GuestPanicked, match="console was silent for 1 s"):
        _wait_for_ssh(SilentGuest(), deadline=started + 30)  # type: ignore[arg-type]
    assert time.monotonic() - started < 10


def test_a_boot_whose_kernel_reports_a_stall_is_booted_again(tmp_path: Path) -> None:
    """host._wait_for_ssh raises GuestPanicked (booted again by host.boot and TestHost.reboot) as
    soon as the console shows a stall report before SSH answers, however busy the console is."""
    from .host import GuestPanicked, _wait_for_ssh

    log = tmp_path / "serial.log"
    log.write_text(CONSOLE)

    class StalledGuest:
        serial_log = log
        port = 9  # discard: nothing answers SSH there

        def is_running(self) -> bool:
            return True

    started = time.monotonic()
    with pytest.raises(GuestPanicked, match=r"reported a stall during boot: .*rcu_preempt detected stalls"):
        _wait_for_ssh(StalledGuest(), deadline=started + 30)  # type: ignore[arg-type]
    assert time.monotonic() - started < 10
