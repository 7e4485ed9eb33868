"""The emulated NUMA test host is what the real-host tier relies on: check it.

Uses the session's shared origin machine (`numa_host`, CPUs 0-3 on NUMA node
0 and 4-7 on node 1); the 3-node interleaved machine is checked where it is
booted (test_real_kubelet.py). Fixtures come from tests/testhost/fixtures.py.
"""

import pytest

from tests.testhost import TestHost

pytestmark = pytest.mark.testhost


def test_pid1_is_systemd_252(numa_host: TestHost) -> None:
    assert numa_host.run("cat /proc/1/comm").stdout.strip() == "systemd"
    version = numa_host.run("systemctl --version").stdout.split()
    assert version[:2] == ["systemd", "252"]


def test_cgroup_v2_with_cpuset_controller(numa_host: TestHost) -> None:
    assert numa_host.run("stat -f -c %T /sys/fs/cgroup").stdout.strip() == "cgroup2fs"
    controllers = numa_host.run("cat /sys/fs/cgroup/cgroup.controllers").stdout.split()
    assert {"cpuset", "cpu", "memory"} <= set(controllers)


def test_numa_nodes_have_the_origin_cpus(numa_host: TestHost) -> None:
    assert _node_cpulists(numa_host) == ["0-3", "4-7"]
    assert numa_host.run("cat /sys/devices/system/cpu/online").stdout.strip() == "0-7"


def test_memory_is_split_over_both_nodes(numa_host: TestHost) -> None:
    sizes = numa_host.run(
        "for node in /sys/devices/system/node/node[0-9]*; do awk '/MemTotal/ {print $4}' \"$node/meminfo\"; done"
    ).stdout.split()
    assert len(sizes) == 2 and all(int(kib) > 700 * 1024 for kib in sizes)


def test_the_image_has_no_kubelet(numa_host: TestHost) -> None:
    """The scenarios copy the built one to their kubeletPath (tests/integration/realkubelet.py):
    none is baked in, so a stack left at the default /usr/bin/kubelet fails its preflight."""
    assert numa_host.run("test -e /usr/bin/kubelet", check=False).rc != 0


def test_containerd_and_runc_are_real(numa_host: TestHost) -> None:
    assert numa_host.run("/usr/bin/containerd --version").stdout.startswith("containerd ")
    assert numa_host.run("runc --version").stdout.startswith("runc version")


def test_default_containerd_is_masked_and_not_running(numa_host: TestHost) -> None:
    state = numa_host.run("systemctl is-enabled containerd.service", check=False).stdout.strip()
    assert state == "masked"
    active = numa_host.run("systemctl is-active containerd.service", check=False).stdout.strip()
    assert active == "inactive"
    assert numa_host.run("pgrep -x containerd", check=False).rc == 1
    assert numa_host.run("test -e /run/containerd/containerd.sock", check=False).rc == 1


def test_no_logind_runs_and_user_slice_is_up_as_on_any_host(numa_host: TestHost) -> None:
    """logind is masked (recipe.py: it relayed every unit change of the product through dbus);
    user.slice, which logind would pull in, is up anyway: the product confines it."""
    assert numa_host.run("systemctl is-enabled systemd-logind.service", check=False).stdout.strip() == "masked"
    assert numa_host.run("pgrep -x systemd-logind", check=False).rc == 1
    assert numa_host.run("systemctl is-active user.slice").stdout.strip() == "active"
    assert numa_host.run("test -d /sys/fs/cgroup/user.slice", check=False).rc == 0


def test_boot_reached_a_healthy_system(numa_host: TestHost) -> None:
    result = numa_host.run("systemctl is-system-running --wait", check=False)
    failed = numa_host.run("systemctl --failed --no-legend --plain").stdout
    assert result.stdout.strip() == "running", failed


def test_stdin_reaches_the_script(numa_host: TestHost) -> None:
    payload = "line one\n$HOME 'quoted' \"double\"\n"
    assert numa_host.run("cat", stdin=payload).stdout == payload
    result = numa_host.run("cat >&2; exit 3", stdin=b"\x00binary", check=False)
    assert (result.rc, result.stderr) == (3, "\x00binary")


def _node_cpulists(host: TestHost) -> list[str]:
    script = "for node in $(ls -d /sys/devices/system/node/node[0-9]* | sort -V); do cat $node/cpulist; done"
    return host.run(script).stdout.split()


def test_sshd_serves_a_connection_without_a_motd_or_executing_itself_again(numa_host: TestHost) -> None:
    """Every remote command of a stack opens a connection of its own: customize_rootfs.sh says what
    each cost the emulated CPU before the image's sshd went without both."""
    listener = numa_host.run("systemctl show --property MainPID --value ssh.service").stdout.strip()
    # sshd retitles itself: "sshd: /usr/sbin/sshd -D -r [listener] 0 of 64-128 startups".
    assert "-r" in numa_host.run(f"tr '\\0' ' ' < /proc/{listener}/cmdline").stdout.split()
    assert numa_host.run("grep -E '^session[[:space:]].*pam_motd' /etc/pam.d/sshd", check=False).rc == 1


def test_daemon_reload_runs_the_fstab_generator_alone(numa_host: TestHost) -> None:
    """Every daemon-reload of the product's scripts reruns the system generators: customize_rootfs.sh
    masks all but the fstab generator, the only one with anything to generate in this image."""
    generated = numa_host.run("cd /run/systemd/generator && find . -mindepth 1 | sort").stdout.split()
    assert generated == [
        "./-.mount",
        "./local-fs.target.requires",
        "./local-fs.target.requires/-.mount",
        "./local-fs.target.wants",
        "./local-fs.target.wants/systemd-remount-fs.service",
    ]
    masked = numa_host.run("ls /etc/systemd/system-generators").stdout.split()
    assert "systemd-getty-generator" in masked and "systemd-fstab-generator" not in masked
