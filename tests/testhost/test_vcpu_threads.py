"""When a test host's vCPUs run in one host thread: decided at its boot and again at each reboot
(fixtures.beside_other_work, host.boot)."""

import subprocess
import sys
import time
from pathlib import Path

from tests import realtools
from tests.testhost import fixtures
from tests.testhost.host import TestHost
from tests.testhost.qemu import QEMU, VM_NAME, QemuProcess, running_test_hosts, with_accel
from tests.testhost.test_testhost_pci import _command
from tests.testhost.topology import ORIGIN


def accel(argv):
    return argv[argv.index("-accel") + 1]


def test_with_accel_changes_the_accel_option_only():
    multi = _command()
    single = with_accel(multi, True)
    assert accel(single) == "tcg,thread=single"
    assert [arg for arg in single if arg != "tcg,thread=single"] == [arg for arg in multi if arg != "tcg,thread=multi"]
    assert with_accel(single, False) == multi


def _host(argv, one_host_thread_at_reboot):
    return TestHost(
        address="127.0.0.1",
        port=2222,
        user="root",
        key_path=Path("/k"),
        host_key="",
        topology=ORIGIN,
        workdir=Path("/w"),
        qemu=QemuProcess(0, Path("/w/qemu.pid")),
        qemu_argv=tuple(argv),
        one_host_thread_at_reboot=one_host_thread_at_reboot,
    )


def test_a_reboot_decides_the_vcpu_threads_again_when_asked_to():
    beside = [True]
    host = _host(_command(one_host_thread=True), lambda: beside[0])
    assert accel(host.next_boot_argv()) == "tcg,thread=single"
    beside[0] = False
    assert accel(host.next_boot_argv()) == "tcg,thread=multi"
    # A module's numa_host power-cycles the origin machine when they no longer fit (fixtures.py).
    assert not host.vcpu_threads_fit()
    beside[0] = True
    assert host.vcpu_threads_fit()
    # Without the question a reboot starts the last boot's command line as it was.
    assert _host(_command(one_host_thread=True), None).next_boot_argv() == _command(one_host_thread=True)


def _process_named(argv0, *args):
    """A real process whose argv reads like `argv0 args...` (bash's exec -a), as qemu's would."""
    quoted = " ".join(args)
    script = f"exec -a {argv0} {sys.executable} -c 'import time; time.sleep(60)' {quoted}"
    process = subprocess.Popen(["bash", "-c", script])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")[0] != argv0.encode():
        assert time.monotonic() < deadline, "the process never took its name"
        time.sleep(0.05)
    return process


def test_a_running_test_host_is_found_and_no_other_qemu():
    test_host = _process_named(QEMU, "-name", VM_NAME)
    other_vm = _process_named(QEMU, "-name", "someone-elses-vm")
    try:
        running = running_test_hosts()
        assert test_host.pid in running
        assert other_vm.pid not in running
        # Beside it a machine rebooted now runs in one host thread; not beside a machine of its
        # own test process, which is idle while that process boots another.
        assert fixtures.beside_other_work()
        own = _host(_command(), None)
        own.qemu = QemuProcess(test_host.pid, own.qemu.pidfile)
        running = set(running_test_hosts()) - {test_host.pid}
        assert fixtures.beside_other_work([own]) == (bool(running) or realtools.the_build_is_running())
    finally:
        for process in (test_host, other_vm):
            process.kill()
            process.wait()
    assert test_host.pid not in running_test_hosts()


def test_no_test_host_in_a_process_table_without_one(tmp_path):
    for pid, argv in {"7": [QEMU, "-name", "someone-elses-vm"], "8": ["bash", "-c", VM_NAME]}.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(b"\0".join(arg.encode() for arg in argv) + b"\0")
    assert running_test_hosts(tmp_path) == []
    (tmp_path / "9").mkdir()
    (tmp_path / "9" / "cmdline").write_bytes(f"/usr/bin/{QEMU}\0-name\0{VM_NAME}\0".encode())
    assert running_test_hosts(tmp_path) == [9]


def test_the_build_runs_beside_the_tests_until_its_exit_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(realtools, "BUILD_EXIT", tmp_path / "build.exit")
    monkeypatch.setenv("NUMA_KUBELETS_TOOLS_BUILDING", "1")
    assert realtools.the_build_is_running()
    assert fixtures.beside_other_work()
    (tmp_path / "build.exit").write_text("0 1200\n")
    assert not realtools.the_build_is_running()
    monkeypatch.delenv("NUMA_KUBELETS_TOOLS_BUILDING")
    (tmp_path / "build.exit").unlink()
    assert not realtools.the_build_is_running()  # no build beside the tests at all


def test_a_first_boot_in_one_of_two_test_workers_is_beside_the_other_workers_machine(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert fixtures.boots_beside_other_work()
