"""A 3-NUMA-node machine with non-contiguous CPU lists, defaults everywhere: apply, check, destroy."""

from __future__ import annotations

from tests.integration.engine import Engine
from tests.integration.hostcheck import HostView

# One CPU per socket, interleaved across nodes, as some BIOSes number them.
NODES = [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_three_interleaved_numa_nodes(boot_testhost, stopwatch):
    with stopwatch("boot 3-node interleaved machine"):
        host = boot_testhost(NODES)
    # The emulated firmware numbers the CPUs as asked (the test host's topology, not the program).
    cpulists = "for node in $(ls -d /sys/devices/system/node/node[0-9]* | sort -V); do cat $node/cpulist; done"
    assert host.run(cpulists).stdout.split() == ["0,3,6", "1,4,7", "2,5"]
    assert host.run("numactl --hardware | head -1").stdout.strip() == "available: 3 nodes (0-2)"
    config = {
        "sshPrivateKeyPath": str(host.key_path),
        "hosts": [
            {
                "name": "numa-c",
                "address": host.address,
                "sshPort": host.port,
                "hostKey": host.host_key,
                "numaNodes": [{"id": 0, "cpus": "0,3,6"}, {"id": 1, "cpus": "1,4,7"}, {"id": 2, "cpus": "2,5"}],
            }
        ],
    }
    engine = Engine(lambda script, stdin: host.run(script, stdin=stdin, check=False))
    view = HostView(host)
    try:
        with stopwatch("first apply (3 NUMA nodes, 11 remote commands)"):
            assert len(engine.up(config)) == 11
        # Defaults: the lowest CPU of each node for the system, the rest for each kubelet.
        expected = {0: ("3,6", 10250), 1: ("4,7", 10350), 2: ("5", 10450)}
        for numa, (cpus, port) in expected.items():
            assert view.effective(f"numa{numa}.slice", "cpus") == cpus
            assert view.effective(f"numa{numa}.slice", "mems") == str(numa)
            record = view.kubelet_record(numa)
            assert record["cpus_allowed_list"] == cpus and record["mems_allowed_list"] == str(numa)
            assert record["config"]["port"] == port
            assert record["flags"]["hostname-override"] == f"numa-c-numa{numa}"
            assert record["config"]["systemReserved"]["cpu"] == str(8 - len(cpus.split(",")))
        assert view.effective("system.slice", "cpus") == "0-2"
        assert view.process_status(1)["Cpus_allowed_list"] == "0-2"
    finally:
        engine.destroy()
    assert view.process_status(1)["Cpus_allowed_list"] == "0-7"
    assert not view.exists("/etc/numa-kubelets")
