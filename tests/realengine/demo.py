"""`make demo` / `make demo-down`: the product working on the emulated origin machine, in one command.

    python -m tests.realengine.demo up       # boot, control plane, `pulumi up` of the demo stack, the proof
    python -m tests.realengine.demo status   # the proof again, from what runs now
    python -m tests.realengine.demo down     # `pulumi destroy`, then stop the control plane and the machine

`up` boots the emulated origin machine (2 NUMA nodes: CPUs 0-3 and 4-7) with the kubelet `make
tools` built, starts the local control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler) on this machine's loopback, and runs `pulumi up` of the stack `demo`, written to
`Pulumi.demo.yaml` from the dev stack: namespace mode (each kubelet its own address on the
guest's network), the cluster, the demo pods. While it runs, tests/realengine/agent.py plays
what the cluster's node agents would do (the images into each containerd; each Node's CNI config
once it has a podCIDR): no registry and no CNI add-on exist here. Then it prints the origin
experiment's result: each NUMA slice's `systemd-cgls` tree with the demo pod's container in it,
each Node with its labels and allocatable share, and the program's placement proof.

Everything stays running, in `.demo/` (gitignored): the machine, the control plane, the state
(file backend), the passphrase, an admin kubeconfig, and `.demo/env.sh` for a shell to look
around. The stack's credential is the admin's, as a kind cluster hands out: the demo's own
namespace and pods need more than the least-privilege list of docs/cluster.md.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as kube_client

from numa_kubelets.config import load_config
from numa_kubelets.plan import Plan, build_plan
from tests import realtools
from tests.cri import PAUSE_IMAGE, WORKLOAD_IMAGE
from tests.realcluster.clients import api_for
from tests.realcluster.controlplane import PIDS_FILE, ControlPlane, inline_kubeconfig
from tests.realengine.agent import NodeAgent
from tests.realengine.engine import RealEngine, UpdateFailed
from tests.realengine.stack import EngineStack, engine_env
from tests.testhost.host import GUEST_KUBELET, TestHost, boot
from tests.testhost.qemu import API_PORT_FILE
from tests.testhost.tools import TestHostError
from tests.testhost.topology import ORIGIN

REPO = realtools.REPO
DEMO_DIR = REPO / ".demo"
STACK = "demo"
# Namespace mode on qemu's user network (DESIGN.md section 7): the kubelets' own addresses.
GATEWAY = "10.0.2.2"
ADDRESSES = {0: "10.0.2.21/24", 1: "10.0.2.22/24"}
CLUSTER_DNS = "10.96.0.10"  # the control plane runs no DNS add-on for the program to read
NAMESPACE = "numa-demo"
# The demo pods' workload. `sleep` as PID 1 ignores SIGTERM (the kernel drops it for a PID
# namespace's init without a handler), so every graceful stop (each drain's eviction, each demo
# pod replaced or destroyed) waited out the demo's 5 s grace for the SIGKILL; the shell exits on it.
WORKLOAD = "/bin/sleep 3600"
COMMAND = ["/bin/sh", "-c", f"trap 'exit 0' TERM; {WORKLOAD} & wait"]


class DemoError(RuntimeError):
    pass


def dev_stack_config() -> dict[str, Any]:
    """Pulumi.dev.yaml's config (the origin machine), keys without their namespace."""
    document = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
    return {key.removeprefix("numa-kubelets:"): value for key, value in document["config"].items()}


def parent_interface(host: TestHost) -> str:
    """The guest's NIC (qemu's restricted user network hands out no default route)."""
    return host.run("ip -o -4 addr show scope global | awk '{ print $2; exit }'").stdout.strip()


def discovered(host: TestHost) -> dict[str, Any]:
    """What `python -m numa_kubelets.discover` prints for the booted host, as a user adding it
    would run it: its `numaNodes`, `systemCpus` and the `hostKey` it answered with."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "numa_kubelets.discover",
            "-i",
            str(host.key_path),
            "-p",
            str(host.port),
            host.user + "@" + host.address,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise TestHostError(f"discover of the machine failed ({result.returncode}): {result.stderr}")
    entry: dict[str, Any] = yaml.safe_load(result.stdout)
    return entry


def demo_stack_config(host: TestHost, parent: str, plane: ControlPlane) -> dict[str, Any]:
    """The dev stack on this machine's origin machine, in namespace mode, joined to `plane`, demo on.

    The host's topology and key are the ones discover reads from it (a stack written from
    discover's output applies unchanged: the real-engine tier checks them against the image)."""
    config = dev_stack_config()
    config["sshPrivateKeyPath"] = str(host.key_path)
    config["containerd"] = {"sandboxImage": PAUSE_IMAGE}  # imported into each instance (agent.py)
    config["cluster"] = {"server": plane.guest_server, "caCert": plane.ca_pem, "dns": CLUSTER_DNS}
    config["demo"] = {"enabled": True, "namespace": NAMESPACE, "image": WORKLOAD_IMAGE, "command": COMMAND}
    [entry] = config["hosts"]
    entry.update(
        address=host.address,
        sshPort=host.port,
        **discovered(host),
        network={"mode": "namespace", "parent": parent, "gateway": GATEWAY},
    )
    # Pulumi.dev.yaml cannot know the booted host's key (made with its image); the demo pins it.
    del config["insecureSkipHostKeyCheck"]
    for kubelet in entry["kubelets"]:
        kubelet["address"] = ADDRESSES[kubelet["numaNode"]]
    return config


def plan_of(config: dict[str, Any]) -> Plan:
    return build_plan(load_config(config))


class Stage:
    """Prints each stage and its time (the demo's times go into docs/benchmarks.md)."""

    def __init__(self, out=sys.stdout) -> None:
        self.out, self.started, self.times = out, time.monotonic(), []

    def __call__(self, what: str):
        stage = self

        class _Timed:
            def __enter__(self_) -> None:
                self_.began = time.monotonic()
                print(f"== {what}", file=stage.out, flush=True)

            def __exit__(self_, *exc: object) -> None:
                stage.times.append((what, time.monotonic() - self_.began))

        return _Timed()

    def summary(self) -> str:
        lines = [f"  {seconds:7.1f} s  {what}" for what, seconds in self.times]
        return "\n".join([*lines, f"  {time.monotonic() - self.started:7.1f} s  in all"])


class DemoStack:
    """The demo stack of one project directory on `host`, joined to the control plane whose admin
    kubeconfig is `admin_kubeconfig`: what `make demo` runs, and what the real-engine tier drives."""

    def __init__(self, project: Path, state_dir: Path, passphrase_file: Path | None, admin_kubeconfig: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.stack = EngineStack(project, STACK, engine_env(state_dir, passphrase_file))
        self.engine = RealEngine(self.stack, {"kubeconfig": inline_kubeconfig(admin_kubeconfig)})
        self.admin_kubeconfig = admin_kubeconfig
        self.core = kube_client.CoreV1Api(api_for(admin_kubeconfig))
        self.config: dict[str, Any] = {}
        # The kubelets whose containerd the node agent gave the images (tests/realengine/agent.py).
        self.images_imported: set[str] = set()

    def up(self, host: TestHost, config: dict[str, Any], *args: str, **run: Any) -> list[tuple[str, str]]:
        """`pulumi up --yes` of `config` (the stack made on first use, the admin kubeconfig its
        secret) with the node agent beside it; the command steps the engine ran."""
        self.config = config
        agent = NodeAgent(host, plan_of(config), self.core, self.images_imported)
        try:
            return self.engine.up(config, *args, beside=lambda: agent, **run)
        except UpdateFailed as failure:
            if agent.errors:
                failure.add_note("node agent's last errors:\n" + "".join(agent.errors))
            raise

    def report(self, host: TestHost) -> str:
        """The origin experiment's result, from what runs now."""
        plan = plan_of(self.config)
        parts = []
        for kubelet in plan.kubelets:
            tree = host.run(f"systemd-cgls --no-pager --xattr=no -u numa{kubelet.numa_node}.slice", check=False).stdout
            parts.append(tree.rstrip())
        parts.append("")
        parts.append(f"{'NODE':<16} {'READY':<6} {'CPU':>9} {'MEMORY':>21}  LABELS (the stack's and numa-kubelets.io/)")
        for kubelet in plan.kubelets:
            node = self.core.read_node(kubelet.node_name)
            ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
            allocatable, capacity = node.status.allocatable, node.status.capacity
            labels = {
                key: value
                for key, value in (node.metadata.labels or {}).items()
                if key in kubelet.label_map or key.startswith("numa-kubelets.io/")
            }
            parts.append(
                f"{kubelet.node_name:<16} {ready!s:<6} {allocatable['cpu'] + '/' + capacity['cpu']:>9} "
                f"{allocatable['memory'] + '/' + capacity['memory']:>21}  "
                + ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
            )
        parts.append("(allocatable/capacity: each Node offers its own NUMA node's CPUs and memory)")
        outputs = self.stack.outputs()
        parts.append("")
        for verdict in outputs.get("placement", []):
            parts.append(
                f"pod {verdict.get('pod')} on {verdict.get('nodeName')}: expected CPUs {verdict.get('expectedCpus')}, "
                f"observed {verdict.get('observedCpus')}, ok={verdict.get('ok')}"
            )
        parts.append(f"placementOk: {json.dumps(outputs.get('placementOk'))}")
        return "\n".join(parts)

    def destroy(self, **run: Any) -> list[tuple[str, str]]:
        return self.engine.destroy(**run)


# ---------------------------------------------------------------- `make demo` / `make demo-down`


def _paths(directory: Path) -> dict[str, Path]:
    return {
        "host": directory / "host",
        "plane": directory / "control-plane",
        "state": directory / "state",
        "passphrase": directory / "passphrase",
        "api_port": directory / API_PORT_FILE,
        "env": directory / "env.sh",
        "log": directory / "up.log",
    }


def _running_host(workdir: Path) -> TestHost | None:
    try:
        host = TestHost.from_state(workdir)
    except FileNotFoundError:
        return None
    return host if host.is_running() else None


def _env_script(paths: dict[str, Path], admin_kubeconfig: Path) -> str:
    q = shlex.quote
    return (
        "# Source me (`. .demo/env.sh`): the built CLI and the demo stack's state, passphrase and cluster.\n"
        f". {q(str(REPO / 'tools/pulumi-env.sh'))}\n"
        f"export PULUMI_BACKEND_URL=file://{q(str(paths['state']))}\n"
        f"export PULUMI_CONFIG_PASSPHRASE_FILE={q(str(paths['passphrase']))}\n"
        "export PULUMI_SKIP_CHECKPOINTS=true\n"
        f"export KUBECONFIG={q(str(admin_kubeconfig))}\n"
    )


def demo_up(directory: Path = DEMO_DIR) -> int:
    stage = Stage()
    paths = _paths(directory)
    if _running_host(paths["host"]) is not None:
        raise DemoError(f"a demo is already running ({paths['host']}): `make demo-down` first")
    if (REPO / f"Pulumi.{STACK}.yaml").exists() or paths["state"].exists():
        raise DemoError(
            f"{REPO / f'Pulumi.{STACK}.yaml'} or {paths['state']} is left from an earlier demo: `make demo-down` first"
        )
    realtools.require("kubelet", "kube-apiserver", "etcd", "pulumi", "pulumi-language-python")
    realtools.require_plugin("command", realtools.pins()["pulumi-command"])
    realtools.require_plugin("kubernetes", realtools.pins()["pulumi-kubernetes"])
    directory.mkdir(exist_ok=True)
    paths["passphrase"].write_text(secrets.token_hex(16) + "\n")
    paths["passphrase"].chmod(0o600)

    with stage("boot the emulated origin machine (2 NUMA nodes: CPUs 0-3, 4-7) and copy the kubelet into it"):
        host = boot(ORIGIN, paths["host"], api_port_file=paths["api_port"])
        host.install_executable(realtools.TOOLS_BIN / "kubelet", GUEST_KUBELET)
    with stage("start the control plane on 127.0.0.1 (etcd, kube-apiserver, controller-manager, scheduler)"):
        plane = ControlPlane(paths["plane"], outlive_parent=True)
        paths["plane"].mkdir(exist_ok=True)
        plane.start()
        paths["api_port"].write_text(f"{plane.port}\n")  # the guest's 10.0.2.100:6443 reaches it from now on
    demo = DemoStack(REPO, paths["state"], paths["passphrase"], plane.admin_kubeconfig)
    config = demo_stack_config(host, parent_interface(host), plane)
    paths["env"].write_text(_env_script(paths, plane.admin_kubeconfig))
    with stage(f"pulumi stack init {STACK} (Pulumi.{STACK}.yaml) and pulumi up"), paths["log"].open("w") as log:
        demo.up(host, config, echo=_Both(sys.stdout, log))
    with stage("the result"):
        print(demo.report(host))
    print(f"\ntimes:\n{stage.summary()}")
    print(
        "\nEverything keeps running. Look around:\n"
        f"  . .demo/env.sh && pulumi stack output --stack {STACK}     # the outputs; KUBECONFIG is the admin's\n"
        f"  {sys.executable} -m tests.realengine.demo status             # this proof again\n"
        f"  ssh -i {host.key_path} -p {host.port} -o UserKnownHostsFile={paths['host'] / 'known_hosts'} "
        f"root@{host.address}   # the machine\n"
        "  make demo-down                                                  # destroy the stack, stop everything"
    )
    (paths["host"] / "known_hosts").write_text(f"[{host.address}]:{host.port} {host.host_key}\n")
    return 0


class _Both:
    def __init__(self, *streams) -> None:
        self.streams = streams

    def write(self, text: str) -> None:
        for stream in self.streams:
            stream.write(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def _demo_stack(paths: dict[str, Path]) -> DemoStack:
    return DemoStack(REPO, paths["state"], paths["passphrase"], paths["plane"] / "admin.kubeconfig")


def demo_status(directory: Path = DEMO_DIR) -> int:
    paths = _paths(directory)
    host = _running_host(paths["host"])
    if host is None:
        raise DemoError("no demo is running: `make demo`")
    demo = _demo_stack(paths)
    document = yaml.safe_load((REPO / f"Pulumi.{STACK}.yaml").read_text())
    demo.config = {
        key.removeprefix("numa-kubelets:"): value
        for key, value in document["config"].items()
        if not isinstance(value, dict) or "secure" not in value
    }
    print(demo.report(host))
    return 0


def demo_down(directory: Path = DEMO_DIR) -> int:
    """Destroys the stack while the machine and control plane run, then stops both; what is not
    running is skipped, so it also cleans up after a demo that failed halfway."""
    paths = _paths(directory)
    host = _running_host(paths["host"])
    stack_file = REPO / f"Pulumi.{STACK}.yaml"
    failed = None
    if stack_file.exists() and paths["state"].exists():
        demo = _demo_stack(paths)
        if host is not None and (paths["plane"] / PIDS_FILE).exists():
            print("== pulumi destroy", flush=True)
            try:
                demo.destroy(echo=sys.stdout)
            except UpdateFailed as error:
                # The machine is thrown away below all the same (its disk is a throwaway overlay).
                failed = f"pulumi destroy failed (exit {error.failure.result.returncode}); stopping everything anyway"
                print(f"== {failed}", flush=True)
        demo.stack.run("stack", "rm", "--yes", "--force")
    stack_file.unlink(missing_ok=True)
    stopped = ControlPlane.stop_recorded(paths["plane"])
    if stopped:
        print(f"== stopped {', '.join(stopped)}")
    if host is not None:
        host.shutdown()
        print(f"== stopped the origin machine (qemu pid {host.qemu.pid})")
    shutil.rmtree(directory, ignore_errors=True)
    return 0 if failed is None else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.realengine.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=("up", "status", "down"))
    args = parser.parse_args(argv)
    try:
        return {"up": demo_up, "status": demo_status, "down": demo_down}[args.command]()
    except (DemoError, TestHostError, realtools.ToolMissing) as error:
        print(f"demo: {error}", file=sys.stderr)
        return 1
    except UpdateFailed as error:
        notes = "".join(f"\n{note}" for note in getattr(error, "__notes__", []))
        print(
            f"demo: pulumi {error.failure.args_[0]} failed (its output is above and in .demo/up.log){notes}\n"
            "Everything is left as it is to look at; `make demo-down` stops and removes it.",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
