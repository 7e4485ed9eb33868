"""kubeletConfig through the whole program: scripts carry it, outputs report what the host read."""

from __future__ import annotations

import pulumi
import pytest

from numa_kubelets.reservations import HUGEPAGE_REPORT_PREFIX
from tests.program.harness import RecordingMocks, run_program


def test_each_kubelets_hugepage_pools_come_from_its_own_command(dev_config, monkeypatch):
    record = RecordingMocks.new_resource

    def kubelet_commands_report_pools(self, args: pulumi.runtime.MockResourceArgs):
        resource_id, state = record(self, args)
        if args.typ == "command:remote:Command" and args.name.endswith("-kubelet"):
            pages = 64 if args.name == "numa-a-numa1-kubelet" else 0
            state = {**state, "stdout": f"noise\n{HUGEPAGE_REPORT_PREFIX} 2048kB={pages} 1048576kB=1\n"}
        return resource_id, state

    monkeypatch.setattr(RecordingMocks, "new_resource", kubelet_commands_report_pools)
    kubelets = run_program(dev_config).outputs["hosts"]["numa-a"]["kubelets"]
    assert kubelets["numa-a-numa0"]["hugepages"] == {"1Gi": 1, "2Mi": 0}
    assert kubelets["numa-a-numa1"]["hugepages"] == {"1Gi": 1, "2Mi": 64}


def test_kubelet_config_reaches_the_kubelet_command(dev_config):
    config = {**dev_config, "kubeletConfig": {"cpuManagerPolicy": "static"}, "kubeletVersion": "1.33"}
    run = run_program(config)
    script = run.named("numa-a-numa1-kubelet").inputs["create"]
    assert "cpuManagerPolicy: static\n" in script and "reservedSystemCPUs: 0-4\n" in script
    assert "strict-cpu-reservation: 'true'\n" in script
    assert '[ "$kubelet_minor" -lt 33 ]' in run.named("numa-a-preflight").inputs["stdin"]


def test_an_owned_field_stops_the_program_before_any_resource(dev_config):
    config = {**dev_config, "kubeletConfig": {"cgroupRoot": "/kubepods"}}
    with pytest.raises(Exception, match=r"kubeletConfig.cgroupRoot: owned by numa-kubelets"):
        run_program(config)
