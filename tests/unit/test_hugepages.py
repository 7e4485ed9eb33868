"""A kubelet's view of the hugepages (hugepages.py), run for real in mount namespaces on a sysfs fixture.

The launcher's shell runs as root in a namespace made the way the kubelet unit makes it
(`unshare --mount --propagation unchanged`) from a "host" namespace whose fixture /sys is a shared
mount, as systemd leaves the real one. While that kubelet namespace is alive, the test reads the
pools from inside it and from the host side: inside, the machine's pools are the own node's and
every other node's read 0; outside nothing changed and no mount below /sys appeared. (The real
sysfs, the real kubelet reading it and its Node's capacity: tests/integration/test_real_cluster.py.)
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from numa_kubelets import hugepages
from tests.unit.test_scripts import tool

TWO_MIB, ONE_GIB = 2048, 1048576
# node -> {page size KiB: pages}; node 2 is memory-only with a pool of its own.
POOLS = {0: {TWO_MIB: 0, ONE_GIB: 0}, 1: {TWO_MIB: 64, ONE_GIB: 2}, 2: {TWO_MIB: 512, ONE_GIB: 0}}


def write_sysfs(root: Path, pools: dict[int, dict[int, int]]) -> Path:
    sys = root / "sys"
    for node, sizes in pools.items():
        for size, pages in sizes.items():
            pool = sys / f"devices/system/node/node{node}/hugepages/hugepages-{size}kB"
            pool.mkdir(parents=True)
            for counter, value in (("nr_hugepages", pages), ("free_hugepages", pages), ("surplus_hugepages", 0)):
                (pool / counter).write_text(f"{value}\n")
    for size in {size for sizes in pools.values() for size in sizes}:
        machine = sys / f"kernel/mm/hugepages/hugepages-{size}kB"
        machine.mkdir(parents=True)
        (machine / "nr_hugepages").write_text(f"{sum(sizes.get(size, 0) for sizes in pools.values())}\n")
        (machine / "nr_overcommit_hugepages").write_text("0\n")
    (sys / "devices/system/node").mkdir(parents=True, exist_ok=True)
    (sys / "devices/system/node/possible").write_text("0-2\n")  # not a node directory: left alone
    return sys


def read_pools(sys: Path) -> str:
    """Every nr_hugepages under the fixture, as `path=value` lines (a shell snippet)."""
    return (
        f"cd {shlex.quote(str(sys))} && for f in kernel/mm/hugepages/*/nr_hugepages "
        'devices/system/node/node*/hugepages/*/nr_hugepages; do [ -e "$f" ] || continue; echo "$f=$(cat "$f")"; done'
    )


def parse(lines: str) -> dict[str, int]:
    return {path: int(value) for path, _, value in (line.partition("=") for line in lines.split())}


def view_in_namespaces(
    tmp_path: Path, own: int, pools: dict[int, dict[int, int]]
) -> tuple[dict[str, int], dict[str, int], str, dict[str, int]]:
    """(inside the kubelet's namespace, the host's view meanwhile, the host's mounts below the
    fixture /sys meanwhile, the host's view before)."""
    sys = write_sysfs(tmp_path, pools)
    ready, done = tmp_path / "ready", tmp_path / "done"
    q = shlex.quote
    view = hugepages.view_shell(
        own,
        sys_mount=str(sys),
        node_root=str(sys / "devices/system/node"),
        machine_pools=str(sys / "kernel/mm/hugepages"),
    )
    kubelet = (
        "set -eu\n" + view + read_pools(sys) + f" > {q(str(tmp_path / 'inside'))}\n"
        f"touch {q(str(ready))}\n"
        f"while [ ! -e {q(str(done))} ]; do sleep 0.05; done\n"
    )
    host = (
        "set -eu\n"
        # The fixture's /sys: a mount point, shared like the host's real one.
        f"mount --bind {q(str(sys))} {q(str(sys))}\n"
        f"mount --make-shared {q(str(sys))}\n"
        f"{read_pools(sys)} > {q(str(tmp_path / 'before'))}\n"
        f"unshare --mount --propagation unchanged -- {q(tool('dash'))} -c {q(kubelet)} &\n"
        f"while [ ! -e {q(str(ready))} ]; do sleep 0.05; done\n"
        f"{read_pools(sys)} > {q(str(tmp_path / 'outside'))}\n"
        f"findmnt -rn -o TARGET -R {q(str(sys))} > {q(str(tmp_path / 'mounts'))}\n"
        f"touch {q(str(done))}\n"
        "wait\n"
    )
    # The "host" is a private namespace of the test's own, gone with it.
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", tool("dash"), "-c", host],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    read = lambda name: (tmp_path / name).read_text()  # noqa: E731
    return parse(read("inside")), parse(read("outside")), read("mounts"), parse(read("before"))


@pytest.mark.parametrize("own", [0, 1])
def test_the_kubelet_sees_its_nodes_pools_as_the_machines_and_the_host_sees_no_change(tmp_path: Path, own: int):
    inside, outside, mounts, before = view_in_namespaces(tmp_path, own, POOLS)
    for size in (TWO_MIB, ONE_GIB):
        pool = f"hugepages-{size}kB/nr_hugepages"
        assert inside[f"kernel/mm/hugepages/{pool}"] == POOLS[own][size]
        assert inside[f"devices/system/node/node{own}/hugepages/{pool}"] == POOLS[own][size]
        for other in set(POOLS) - {own}:  # the memory-only node 2 included
            assert inside[f"devices/system/node/node{other}/hugepages/{pool}"] == 0
    # Outside, while the kubelet's namespace lives: the machine as it is, no mount below /sys.
    assert outside == before
    assert mounts.split() == [str(tmp_path / "sys")]


def test_a_host_without_hugepage_support_is_left_alone(tmp_path: Path):
    """No pool directories (a kernel without hugetlbfs): the launcher goes on, nothing is mounted."""
    inside, outside, mounts, before = view_in_namespaces(tmp_path, 0, {})
    assert inside == outside == before == {}
    assert mounts.split() == [str(tmp_path / "sys")]
