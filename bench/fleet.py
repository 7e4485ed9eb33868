"""Benchmark: evaluation of the real program under Pulumi's mock engine versus fleet size.

Not a test: it prints figures. For every fleet (hosts x NUMA nodes per host) it runs, each in
a fresh subprocess so that time and peak memory are independent of the other cases:

- the program: the real __main__.py evaluated under `pulumi.runtime.set_mocks`, exactly as
  tests/program/harness.py does;
- the baseline: a trivial program that registers the same resources (same types, names and
  parents, as recorded from the program's run) with tiny inputs under the same mocks: the
  floor the Pulumi SDK itself sets for that many resources.

Usage (from the repository root, with the venv):
    .venv/bin/python bench/fleet.py                    # 1, 10, 100, 500 hosts x 2 and 8 NUMA nodes
    .venv/bin/python bench/fleet.py --hosts 500 --numa 8 --json bench.json
    .venv/bin/python bench/fleet.py --hosts 100 --numa 8 --profile both --profile-dir /tmp/prof
        # cProfile of each run: /tmp/prof/{program,baseline}-100x8.pstats (python -m pstats FILE)
    .venv/bin/python bench/fleet.py --no-gc            # both programs without the cyclic GC
    .venv/bin/python bench/fleet.py --hosts 100 --numa 8 --tracemalloc program --profile-dir /tmp/mem
        # what holds the memory at the end of the program's run (its peak: everything registered is
        # alive until then): the top 25 allocation sites by size, grouped by file, by line and by
        # traceback, and the live objects by type (gc.get_objects); printed and written to
        # /tmp/mem/program-100x8.memory.txt. tracemalloc slows the run and adds its own memory:
        # read the sizes and shares, not the run's time or peak RSS.

Columns: `program s` / `baseline s` are the evaluation wall time (libraries already imported),
`ratio` their quotient (issue 6's target: <= 1.5 at 500 x 8); the CPU columns are the same in
process CPU time, steadier than wall time on a shared machine; `core s` is the pure core alone
(validate the config, build the plan, render every script: a part of `program s`, timed
separately after it); `serialize s` the time spent in the SDK's `serialize_provider`, the
pickling of each dynamic resource's provider (a part of `program s`; `dynamic resources` says
how many: one NodeLifecycle per kubelet and one ClusterPreflight with a cluster); `GC s` the time spent in Python's cyclic garbage collector (a part of
`program s` / `baseline s`); peak RSS of each subprocess; resources registered (the root
Stack not counted); resources and remote commands per host (each command is one SSH session
per apply when its inputs change). Each case's program and baseline run back to back; with
--repeat N the fastest of N counts.
"""

from __future__ import annotations

import argparse
import base64
import gc
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT_DIR = Path(__file__).resolve().parents[1]
COMMAND_TYPE = "command:remote:Command"
CPUS_PER_NODE = 8
DEFAULT_HOSTS = (1, 10, 100, 500)
DEFAULT_NUMA = (2, 8)
# Secrets of the generated stacks: placeholders that pass validation.
FAKE_PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nbenchmark\n-----END OPENSSH PRIVATE KEY-----\n"
FAKE_TOKEN = "abcdef.0123456789abcdef"
FAKE_CA = "-----BEGIN CERTIFICATE-----\nTUlJQmJlbmNobWFyaw==\n-----END CERTIFICATE-----\n"


# ---------------------------------------------------------------- fleet configs


def fake_host_key(index: int) -> str:
    """A well-formed ed25519 public key of host `index`'s own, as every host of a fleet pins one
    (no host has it; nothing connects in a benchmark)."""
    key_type, key = b"ssh-ed25519", hashlib.sha256(f"benchmark host {index}".encode()).digest()
    blob = b"".join(len(part).to_bytes(4, "big") + part for part in (key_type, key))
    return f"ssh-ed25519 {base64.b64encode(blob).decode()}"


def fleet_config(
    hosts: int, numa_nodes: int, cluster: bool = True, demo: bool = False, classes: bool = False
) -> dict[str, Any]:
    """A valid stack config: `hosts` hosts with `numa_nodes` NUMA nodes of 8 CPUs each.

    Defaults everywhere else (systemCpus: the lowest CPU of each node; one kubelet per node),
    the production shape: an SSH key and, with `cluster`, an API server and bootstrap token.
    With `classes` the NUMA nodes are one host class's and each host is its name, address,
    class and hostKey (docs/fleets.md): the same hosts, plan and resources.
    """
    numa_list = [
        {"id": node, "cpus": f"{node * CPUS_PER_NODE}-{(node + 1) * CPUS_PER_NODE - 1}"} for node in range(numa_nodes)
    ]
    class_name = f"{numa_nodes}x{CPUS_PER_NODE}-cpus"
    host_list = []
    for index in range(hosts):
        host_list.append(
            {
                "name": f"node-{index:04d}",
                "address": f"10.{index // 65536}.{index // 256 % 256}.{index % 256 + 1}"
                if index % 256 != 255
                else f"node-{index:04d}.fleet.example.internal",
                "hostKey": fake_host_key(index),
                **({"class": class_name} if classes else {"numaNodes": numa_list}),
            }
        )
    config: dict[str, Any] = {"hosts": host_list, "sshPrivateKey": FAKE_PRIVATE_KEY}
    if classes:
        config["hostClasses"] = {class_name: {"numaNodes": numa_list}}
    if cluster:
        config["cluster"] = {"server": "https://192.0.2.1:6443", "caCert": FAKE_CA, "dns": "10.96.0.10"}
        config["bootstrapToken"] = FAKE_TOKEN
        config["demo"] = {"enabled": demo}
    return config


# ---------------------------------------------------------------- child: one measurement


def _setup_path() -> None:
    if str(PROJECT_DIR) not in sys.path:
        sys.path.insert(0, str(PROJECT_DIR))
    os.chdir(PROJECT_DIR)


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class SerializationClock:
    """Wall time spent in the SDK's `serialize_provider`, the pickling of every dynamic
    resource's provider (NodeLifecycle per kubelet, ClusterPreflight per stack)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def install(self) -> None:
        from pulumi.dynamic import dynamic

        serialize = dynamic.serialize_provider

        def timed(provider):
            started = time.perf_counter()
            try:
                return serialize(provider)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        dynamic.serialize_provider = timed


class GcClock:
    """Wall time spent in Python's cyclic garbage collector (gc.callbacks), by generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full_collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.full_collections += info.get("generation") == 2


def _evaluate(stack_config: dict[str, Any], program, profile: str | None = None, preview: bool = False):
    """Run `program` under the same mocks as tests/program/harness.py; return (wall s, CPU s, clocks, mocks, monitor)."""
    import pulumi
    from pulumi.runtime import settings
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    from tests.program.harness import NAMESPACE, SECRET_KEYS, RecordingMocks, RecordingMonitor, config_values

    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    serialization = SerializationClock()
    serialization.install()
    clock = GcClock()
    gc.callbacks.append(clock)
    start = time.perf_counter()
    cpu_start = time.process_time()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    settings.set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(mocks, project=NAMESPACE, stack="bench", preview=preview, monitor=monitor)
    values = config_values(stack_config)
    pulumi.runtime.set_all_config(values, [k for k in values if k.split(":", 1)[1] in SECRET_KEYS])
    settings.SETTINGS.rpc_manager.clear()
    settings.SETTINGS.outputs.clear()
    root = settings.get_root_resource()
    _sync_await(run_pulumi_func(program))
    for value in root.outputs.values():
        _sync_await(pulumi.Output.from_input(value).future())
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    gc.callbacks.remove(clock)
    if profiler is not None:
        profiler.dump_stats(profile)
    return seconds, cpu_seconds, clock, serialization, mocks, monitor


def start_tracemalloc(frames: int) -> None:
    import tracemalloc

    tracemalloc.start(frames)


def memory_report(title: str, monitor: Any = None, top: int = 25) -> str:
    """What holds the memory now: tracemalloc's snapshot grouped by file, line and traceback
    (the allocations made since start_tracemalloc), and the live objects the cyclic GC tracks,
    counted by type with their shallow sizes (sys.getsizeof: a str's bytes, a dict's table)."""
    import collections
    import tracemalloc

    current, peak = tracemalloc.get_traced_memory()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"))
    )
    tracemalloc.stop()
    mib = 1024 * 1024
    out = [
        f"# {title}",
        f"tracemalloc: {current / mib:,.1f} MiB traced now, {peak / mib:,.1f} MiB at its peak; "
        f"peak RSS {_peak_rss_mib():,.0f} MiB",
    ]
    if monitor is not None:
        # The bench's mock engine (tests/program/harness.py) keeps every RegisterResource request: protobuf
        # messages in upb's own memory, which tracemalloc does not see; their serialized size is a floor.
        requests = sum(request.ByteSize() for request in monitor.requests.values())
        objects = sum(
            getattr(request, "object" if "object" in request.DESCRIPTOR.fields_by_name else "properties").ByteSize()
            for request in monitor.requests.values()
        )
        out.append(
            f"the harness's {len(monitor.requests):,} recorded requests (untraced, upb): {requests / mib:,.1f} MiB "
            f"serialized, of which the resources' inputs {objects / mib:,.1f} MiB"
        )
    total = sum(stat.size for stat in snapshot.statistics("filename"))
    prefix = str(PROJECT_DIR) + os.sep
    for key in ("filename", "lineno"):
        out.append(f"\n## top {top} by {key} (of {total / mib:,.1f} MiB)")
        for stat in snapshot.statistics(key)[:top]:
            frame = stat.traceback[0]
            where = frame.filename.replace(prefix, "").split("site-packages/")[-1]
            where += f":{frame.lineno}" if key == "lineno" else ""
            out.append(f"{stat.size / mib:9.1f} MiB {100 * stat.size / total:5.1f} % {stat.count:>10,} blocks  {where}")
    out.append("\n## top 10 by traceback (innermost last)")
    for stat in snapshot.statistics("traceback")[:10]:
        out.append(f"{stat.size / mib:9.1f} MiB {100 * stat.size / total:5.1f} % {stat.count:>10,} blocks")
        for frame in stat.traceback:
            out.append(f"      {frame.filename.replace(prefix, '').split('site-packages/')[-1]}:{frame.lineno}")
    del snapshot
    gc.unfreeze()  # the program froze its objects (components/heap.py): gc.get_objects() omits frozen ones
    counts: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        name = f"{type(obj).__module__}.{type(obj).__qualname__}"
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
    out.append(f"\n## live objects tracked by the GC: top {top} types by shallow size")
    for name, size in sizes.most_common(top):
        out.append(f"{size / mib:9.1f} MiB {counts[name]:>10,}  {name}")
    out.append("(str, bytes and numbers are not tracked by the GC: they are in tracemalloc's figures above)")
    return "\n".join(out) + "\n"


def _tree(mocks, monitor) -> list[dict[str, Any]]:
    """Every registered resource in registration order: type, name, parent (type, name)."""
    parents = {}
    for _urn, request in monitor.requests.items():
        parent = request.parent.split("::")[-2:] if request.parent else None
        if parent is not None:
            parent = [parent[0].rsplit("$", 1)[-1], parent[1]]
        parents[(request.type, request.name)] = parent
    return [{"type": r.type, "name": r.name, "parent": parents.get((r.type, r.name))} for r in mocks.resources]


def _core_seconds(stack_config: dict[str, Any]) -> float:
    """The pure core alone: validate, plan, and render every script and stdin the components
    ask the core for (components/host.py, numa_slice.py, kubelet_instance.py, demo.py)."""
    from numa_kubelets import placement, scripts
    from numa_kubelets.config import decode_pulumi_values, load_config
    from numa_kubelets.plan import build_plan
    from tests.program.harness import config_values

    start = time.perf_counter()
    values = {k.split(":", 1)[1]: v for k, v in config_values(stack_config).items()}
    config = load_config(decode_pulumi_values(values))
    plan = build_plan(config)
    placement.check_demo(config, plan)
    token = stack_config.get("bootstrapToken")
    for host in plan.hosts:
        scripts.preflight_scripts(host, plan)
        scripts.host_services_scripts(host)
        for kubelet in host.kubelets:
            scripts.slice_scripts(host, kubelet)
            scripts.containerd_scripts(host, kubelet, plan)
            scripts.kubelet_scripts(host, kubelet, plan)
            if plan.cluster is not None:
                scripts.bootstrap_kubeconfig_stdin(kubelet, plan, token)
    hosts = {host.name: host for host in plan.hosts}
    for pod in placement.demo_pods(config, plan):
        placement.probe_scripts(pod, hosts[pod.kubelet.host], plan)
    return time.perf_counter() - start


def _baseline_program(tree: list[dict[str, Any]]):
    """Registers the recorded resources with tiny inputs: components as components, commands as
    commands with a minimal connection, anything else as a bare custom resource of its type."""
    import pulumi
    import pulumi_command as command

    def program() -> None:
        made: dict[tuple[str, str], pulumi.Resource] = {}
        connection = command.remote.ConnectionArgs(host="192.0.2.1")
        for entry in tree:
            kind, name = entry["type"], entry["name"]
            if kind == "pulumi:pulumi:Stack":
                continue
            parent = made.get(tuple(entry["parent"])) if entry["parent"] else None
            opts = pulumi.ResourceOptions(parent=parent)
            if kind == COMMAND_TYPE:
                resource = command.remote.Command(name, connection=connection, create="true", opts=opts)
            elif kind.startswith("numa-kubelets:"):
                resource = pulumi.ComponentResource(kind, name, None, opts)
            else:
                resource = pulumi.CustomResource(kind, name, {}, opts)
            made[(kind, name)] = resource

    return program


def child(args: argparse.Namespace) -> None:
    _setup_path()
    # Import every library both programs use before the clock starts: evaluation only.
    import runpy

    import pulumi  # noqa: F401
    import pulumi_command  # noqa: F401
    import pulumi_kubernetes
    import pulumi_random  # noqa: F401

    import components.cluster
    import components.demo
    import components.host
    import components.stack_config  # noqa: F401
    import numa_kubelets.outputs  # noqa: F401

    # pulumi_kubernetes loads its API groups on first use: load the ones the program uses.
    _ = pulumi_kubernetes.core.v1.Pod, pulumi_kubernetes.meta.v1.ObjectMetaArgs, pulumi_kubernetes.rbac.v1.Role

    stack_config = fleet_config(
        args.hosts_n, args.numa_n, cluster=not args.no_cluster, demo=args.demo, classes=args.classes
    )
    result: dict[str, Any] = {"hosts": args.hosts_n, "numa": args.numa_n, "kind": args.child}
    if args.no_gc:
        gc.disable()
    # Without a live cluster the demo's verdict fails an update; a preview only reports it.
    preview = args.preview or args.demo
    if args.memory_out:
        start_tracemalloc(args.tracemalloc_frames)
    if args.child == "program":
        main = str(PROJECT_DIR / "__main__.py")
        seconds, cpu_seconds, clock, serialization, mocks, monitor = _evaluate(
            stack_config, lambda: runpy.run_path(main, run_name="__main__"), args.profile_out, preview
        )
        if args.memory_out:  # the heap as the run left it, before anything below allocates more
            Path(args.memory_out).write_text(memory_report(f"program {args.hosts_n} x {args.numa_n}", monitor))
        tree = _tree(mocks, monitor)
        Path(args.tree).write_text(json.dumps(tree))
        result["core_seconds"] = _core_seconds(stack_config)
    else:
        tree = json.loads(Path(args.tree).read_text())
        seconds, cpu_seconds, clock, serialization, mocks, monitor = _evaluate(
            stack_config, _baseline_program(tree), args.profile_out, preview
        )
        if args.memory_out:
            Path(args.memory_out).write_text(memory_report(f"baseline {args.hosts_n} x {args.numa_n}", monitor))
    result["seconds"] = seconds
    result["cpu_seconds"] = cpu_seconds
    result["gc_seconds"] = clock.seconds
    result["gc_full_collections"] = clock.full_collections
    result["serialize_seconds"] = serialization.seconds
    result["dynamic_resources"] = serialization.calls
    result["peak_rss_mib"] = _peak_rss_mib()
    result["resources"] = len(mocks.resources)
    result["commands"] = sum(1 for r in mocks.resources if r.type == COMMAND_TYPE)
    result["types"] = sorted({r.type for r in mocks.resources})
    print(json.dumps(result))


# ---------------------------------------------------------------- parent: the table


def _run_child(kind: str, hosts: int, numa: int, tree: Path, args: argparse.Namespace, profile: str | None) -> dict:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        kind,
        "--hosts-n",
        str(hosts),
        "--numa-n",
        str(numa),
        "--tree",
        str(tree),
    ]
    if args.no_cluster:
        command.append("--no-cluster")
    for flag in ("demo", "preview", "no_gc", "classes"):
        if getattr(args, flag):
            command.append("--" + flag.replace("_", "-"))
    if profile:
        command += ["--profile-out", profile]
    if args.tracemalloc in (kind, "both"):
        memory = Path(args.profile_dir).resolve() / f"{kind}-{hosts}x{numa}.memory.txt"
        command += ["--memory-out", str(memory), "--tracemalloc-frames", str(args.tracemalloc_frames)]
    completed = subprocess.run(command, capture_output=True, text=True, cwd=PROJECT_DIR)
    if completed.returncode != 0:
        sys.stderr.write(completed.stderr)
        raise SystemExit(f"benchmark case {kind} {hosts}x{numa} failed (exit {completed.returncode})")
    if args.tracemalloc in (kind, "both"):
        sys.stderr.write(memory.read_text())
    return json.loads(completed.stdout.strip().splitlines()[-1])


def measure(hosts: int, numa: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="numa-kubelets-bench-") as scratch:
        tree = Path(scratch) / "tree.json"
        profile_program = profile_baseline = None
        if args.profile in ("program", "both"):
            profile_program = str(Path(args.profile_dir).resolve() / f"program-{hosts}x{numa}.pstats")
        if args.profile in ("baseline", "both"):
            profile_baseline = str(Path(args.profile_dir).resolve() / f"baseline-{hosts}x{numa}.pstats")
        best_program = best_baseline = None
        for _ in range(args.repeat):
            program = _run_child("program", hosts, numa, tree, args, profile_program)
            baseline = _run_child("baseline", hosts, numa, tree, args, profile_baseline)
            if best_program is None or program["seconds"] < best_program["seconds"]:
                best_program = program
            if best_baseline is None or baseline["seconds"] < best_baseline["seconds"]:
                best_baseline = baseline
    assert best_program is not None and best_baseline is not None
    if best_program["resources"] != best_baseline["resources"]:
        raise SystemExit(
            f"baseline registered {best_baseline['resources']} resources, the program {best_program['resources']}"
        )
    return {
        "hosts": hosts,
        "numaNodes": numa,
        "programSeconds": round(best_program["seconds"], 3),
        "baselineSeconds": round(best_baseline["seconds"], 3),
        "ratio": round(best_program["seconds"] / best_baseline["seconds"], 2),
        "programCpuSeconds": round(best_program["cpu_seconds"], 3),
        "baselineCpuSeconds": round(best_baseline["cpu_seconds"], 3),
        "cpuRatio": round(best_program["cpu_seconds"] / best_baseline["cpu_seconds"], 2),
        "programGcSeconds": round(best_program["gc_seconds"], 3),
        "baselineGcSeconds": round(best_baseline["gc_seconds"], 3),
        "programFullGcs": best_program["gc_full_collections"],
        "coreSeconds": round(best_program["core_seconds"], 3),
        "serializeSeconds": round(best_program["serialize_seconds"], 3),
        "dynamicResources": best_program["dynamic_resources"],
        "programPeakRssMiB": round(best_program["peak_rss_mib"], 1),
        "baselinePeakRssMiB": round(best_baseline["peak_rss_mib"], 1),
        "resources": best_program["resources"],
        "resourcesPerHost": round(best_program["resources"] / hosts, 2),
        "commandsPerHost": round(best_program["commands"] / hosts, 2),
        "resourceTypes": best_program["types"],
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    header = (
        "| hosts | NUMA/host | program s | baseline s | ratio | program CPU s | baseline CPU s | CPU ratio "
        "| core s | serialize s | dynamic resources | program GC s | baseline GC s | program peak RSS MiB | baseline peak RSS MiB | resources "
        "| resources/host | remote commands/host |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = [
        f"| {r['hosts']} | {r['numaNodes']} | {r['programSeconds']:.2f} | {r['baselineSeconds']:.2f} | {r['ratio']:.2f} "
        f"| {r['programCpuSeconds']:.2f} | {r['baselineCpuSeconds']:.2f} | {r['cpuRatio']:.2f} "
        f"| {r['coreSeconds']:.2f} | {r['serializeSeconds']:.2f} | {r['dynamicResources']} | {r['programGcSeconds']:.2f} | {r['baselineGcSeconds']:.2f} | {r['programPeakRssMiB']:.0f} | {r['baselinePeakRssMiB']:.0f} | {r['resources']} "
        f"| {r['resourcesPerHost']:g} | {r['commandsPerHost']:g} |\n"
        for r in rows
    ]
    return header + "".join(lines)


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=_numbers, default=DEFAULT_HOSTS, help="comma-separated fleet sizes")
    parser.add_argument("--numa", type=_numbers, default=DEFAULT_NUMA, help="comma-separated NUMA nodes per host")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the fastest counts")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON ('-': stdout, after the table)")
    parser.add_argument(
        "--no-cluster", action="store_true", help="standalone kubelets (no bootstrap kubeconfig on stdin)"
    )
    parser.add_argument(
        "--demo", action="store_true", help="enable the demo pods (needs the cluster; implies --preview)"
    )
    parser.add_argument("--preview", action="store_true", help="evaluate as `pulumi preview` does (default: as `up`)")
    parser.add_argument(
        "--classes", action="store_true", help="write the hosts with one host class (name, address, class, hostKey)"
    )
    parser.add_argument("--no-gc", action="store_true", help="disable Python's cyclic GC in both programs")
    parser.add_argument(
        "--profile", choices=("program", "baseline", "both"), help="write cProfile stats per case (read with pstats)"
    )
    parser.add_argument("--profile-dir", default=".", help="where --profile writes <kind>-<hosts>x<numa>.pstats")
    parser.add_argument(
        "--tracemalloc",
        choices=("program", "baseline", "both"),
        help="what holds the memory at the end of the run (tracemalloc, gc.get_objects): printed to stderr and "
        "written to <profile-dir>/<kind>-<hosts>x<numa>.memory.txt; slows the run",
    )
    parser.add_argument("--tracemalloc-frames", type=int, default=12, help="frames kept per allocation")
    # Internal: one measurement in this subprocess.
    parser.add_argument("--child", choices=("program", "baseline"), help=argparse.SUPPRESS)
    parser.add_argument("--hosts-n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--numa-n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help=argparse.SUPPRESS)
    parser.add_argument("--memory-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if args.profile or args.tracemalloc:
        Path(args.profile_dir).mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    rows = []
    for numa in args.numa:
        for hosts in args.hosts:
            row = measure(hosts, numa, args)
            rows.append(row)
            print(
                f"measured {hosts} x {numa}: program {row['programSeconds']:.2f}s, "
                f"baseline {row['baselineSeconds']:.2f}s, ratio {row['ratio']:.2f}",
                file=sys.stderr,
                flush=True,
            )
    rows.sort(key=lambda r: (r["numaNodes"], r["hosts"]))
    total = time.perf_counter() - started
    sys.stdout.write(markdown(rows))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sys.stdout.write(
        f"\nPython {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average at the end {load:.1f}; "
        f"whole benchmark {total:.0f} s (fastest of {args.repeat} per case).\n"
    )
    if args.json:
        document = json.dumps({"rows": rows, "totalSeconds": round(total, 1)}, indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(document)
        else:
            Path(args.json).write_text(document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
