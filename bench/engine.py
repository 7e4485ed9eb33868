"""Benchmark: the real program under the real engine (the built CLI and language host) versus fleet size.

Not a test: it prints figures and asserts no time. bench/fleet.py measures the program's own
evaluation under the mock engine; this measures what a user waits for: `pulumi preview` and
`pulumi up` of a standalone stack (no cluster, no demo) of N identical hosts with 8 NUMA nodes
of 8 CPUs, run by the CLI of `make tools` (tools/build.sh: CLI v3.274.1, its Python language
host, this project's pulumi-command double) with a local file backend, offline, in a copy of
the project in a temporary directory (as tests/e2e/test_quick_start.py runs the Quick start).

Two programs per fleet, each previewed and applied the same way:

- `program`: this repository's __main__.py, components/ and numa_kubelets/ byte for byte,
  with a generated stack file;
- `bare`: a flat program of the same count of `command:remote:Command` resources, with
  create/delete scripts and stdin of the program's own sizes (measured from a mock evaluation
  of one host, command by command), the same connection shape and no components, no
  dependencies, no StackReference: the engine's floor for that many commands.

The hosts are 127.0.0.1 at ports where nothing listens (checked when the stack is written):
a preview contacts nothing. `pulumi up` runs against "hosts that answer at once": the command
double's benchmark mode (NUMA_KUBELETS_COMMAND_DOUBLE_BENCHMARK=1, tools/plugin-doubles/command/
remote/benchmark.go; bench/README.md says why that measures what it should), in which create,
update and delete return at once with empty outputs, without SSH, only for loopback addresses
where nothing listens. No script ever runs on this machine.

Two options shape the program's stack (the bare program is the same either way):

- `--classes`: the hosts written with one host class (numa-kubelets:hostClasses: the NUMA nodes
  and the one SSH port), each host its name, address, class and hostKey, as docs/fleets.md
  writes a fleet: what lets 625 x 8 under the PULUMI_CONFIG ceiling. Each host then has its own
  loopback address (127.1.x.y: all of 127/8 is loopback, and the double's benchmark mode takes
  any loopback IP) at one port where nothing listens on any of them (checked). Written out, the
  hosts are 127.0.0.1 at a closed port each, as before. Either way the stack config's size as
  the language host passes it (numa_kubelets/config_size.py, the secrets at their plain
  length) is printed, and a stack over the limit is not run.
- `--cluster`: a stack joining a cluster (cluster.server, caCert, cluster.dns, a configured
  bootstrapToken and a kubeconfig credential, both set as secrets with `pulumi config set
  --secret`; demo off): 75 resources per 8-node host instead of 43. Only a preview can run it,
  and it runs offline, without an API server. Why, from what the code does:
  * the kubernetes provider (pulumi-kubernetes 4.25.0, provider/pkg/provider/provider.go): its
    Configure does not fail at an unreachable cluster, it records `clusterUnreachable` (the
    server version and the schema cannot be read) and goes on; Check then skips the
    server-side validation, and Create in a preview returns the inputs as the planned state
    (only a real Create fails: "configured Kubernetes cluster is unreachable"). Read (a
    `.get`, the kube-dns Service the program reads when cluster.dns is unset) fails even in a
    preview: so cluster.dns is set, and no Service is read;
  * the program's ClusterPreflight and each NodeLifecycle are dynamic resources: their
    provider runs only in a create, update or delete (a preview asks the default Check, and
    a Diff only of a resource with a state): a preview of a new stack contacts no cluster;
  * a configured bootstrapToken: no managed token, so no RandomString/RandomPassword and no
    token Secret or bindings to plan (tests/e2e/test_engine_findings.py previews the same
    kind of stack with every address closed, "contacting nothing").
  So cluster.server and the credential's server are https://127.0.0.1 at a closed loopback
  port (checked): a connection is refused at once. A control plane of tests/realcluster is not
  needed for a preview and is not used (it would add an etcd and a kube-apiserver to the
  machine's load and to no figure). An `up` of a cluster stack would need one (the preflight,
  the Nodes' Ready wait) and kubelets that join, which the benchmark mode has not: `--cluster`
  refuses any operation but preview and preview-diff.

Per stack the operations run in order on one state (`--ops`):
  preview        `pulumi preview` of the fresh stack (everything to create)
  preview-diff   `pulumi preview --diff` of it, as the pull-request workflow runs it
  up             `pulumi up --yes` as a user types it (its own preview, then the update)
  preview-again  `pulumi preview --expect-no-changes` after the up
  reup           `pulumi up --yes` again, with nothing to change

Each operation is timed (wall) and its process tree watched: the CLI's peak RSS is the kernel's
high-water mark of the `pulumi` process (VmHWM in /proc/<pid>/status, polled every
--poll seconds, so only growth in the last interval before it exits could be missed); also the
peak of the program's Python process, the peak sum of the tree's RSS, and the CPU time of the
whole tree (getrusage of the waited CLI, which includes the plugins, language host and
program it waited for).

Usage (from the repository root, with the venv, after `bash tools/build.sh pulumi`):
    .venv/bin/python bench/engine.py                         # the whole grid below (about 45 minutes)
    .venv/bin/python bench/engine.py --hosts 25 --checkpoints skip --ops preview,up
    .venv/bin/python bench/engine.py --kinds program --hosts 100 --checkpoints write --ops preview
    .venv/bin/python bench/engine.py --table results.jsonl    # the table of earlier runs
    .venv/bin/python bench/engine.py --kinds program --hosts 625 --checkpoints skip --ops preview --cluster --classes

After the table it prints the growth between fleet sizes: per program, stack, checkpoints and
operation, the factor of wall time, CPU time and the CLI's peak RSS from each size to the next
(e.g. 100 -> 625 x 8: the hosts' factor is 6.25; linear growth reads about that).

The default grid: program and bare, 25 and 100 hosts x 8, checkpoints written (the engine's
default) and skipped (PULUMI_SKIP_CHECKPOINTS=true), and 500 x 8 skipped only (with them it
takes hours: --max-hosts-writing-checkpoints); every operation but preview-diff, except that a
stack writing checkpoints above 25 hosts is only previewed (--max-hosts-up-writing-checkpoints).
A case whose stack config would not fit in PULUMI_CONFIG (Linux: 128 KiB for one environment
string; the program's 500 x 8 does not) is reported and left out. --jsonl FILE appends each
operation's row as it ends, so a long run keeps what it measured.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROJECT_DIR = Path(__file__).resolve().parents[1]
if str(PROJECT_DIR) not in sys.path:
    sys.path.insert(0, str(PROJECT_DIR))

from bench.fleet import fake_host_key  # noqa: E402
from numa_kubelets.config_size import ConfigSize, pulumi_config_bytes  # noqa: E402
from tests import realtools  # noqa: E402  (the repository root is on the path only now)

COMMAND_TYPE = "command:remote:Command"
CPUS_PER_NODE = 8
BENCHMARK_VARIABLE = "NUMA_KUBELETS_COMMAND_DOUBLE_BENCHMARK"
# What the double's benchmark mode says in every run (tools/plugin-doubles/command/remote/benchmark.go).
BENCHMARK_WARNING = "BENCHMARK MODE (NUMA_KUBELETS_COMMAND_DOUBLE_BENCHMARK=1): no command runs"
DOUBLE_IDENTITY = "numa-kubelets test double of pulumi-command"
STACK = "bench"
# What the program is made of, copied into the temporary project (tests/e2e/test_quick_start.py).
PROJECT_FILES = ("Pulumi.yaml", "__main__.py", "requirements.txt")
PROJECT_PACKAGES = ("components", "numa_kubelets")
FIRST_PORT = 40000
HOST_CLASS = "bench-8x8"  # the one class of a stack written with --classes
CLUSTER_DNS = "10.96.0.10"  # set, so that the program reads no kube-dns Service (a Read fails offline)
# A bootstrap token of the right form; nothing ever presents it (no cluster answers).
BOOTSTRAP_TOKEN = "benchk.0123456789benchk"
OPERATIONS = ("preview", "preview-diff", "up", "preview-again", "reup")
DEFAULT_OPS = ("preview", "up", "preview-again", "reup")
KINDS = ("program", "bare")
CHECKPOINTS = ("write", "skip")


# ---------------------------------------------------------------- the stacks


def closed_ports(count: int, first: int = FIRST_PORT) -> list[int]:
    """`count` loopback ports where nothing accepts a connection now (the kernel refuses at once)."""
    ports: list[int] = []
    port = first
    while len(ports) < count:
        if port > 65535:
            raise SystemExit(f"fewer than {count} closed loopback ports from {first}")
        with socket.socket() as probe:
            probe.settimeout(1)
            try:
                probe.connect(("127.0.0.1", port))
            except ConnectionRefusedError:
                ports.append(port)
            except OSError:
                pass  # neither open nor plainly refused: leave it out
        port += 1
    return ports


def host_entries(ports: list[int], numa_nodes: int) -> list[dict[str, Any]]:
    """Identical hosts at 127.0.0.1, one closed port each; defaults everywhere else (systemCpus:
    the lowest CPU of each node; one kubelet per node)."""
    return [
        {
            "name": f"node-{index:04d}",
            "address": "127.0.0.1",
            "sshPort": port,
            "hostKey": fake_host_key(index),  # nothing connects in the benchmark mode; pinned as in a fleet
            "numaNodes": [
                {"id": node, "cpus": f"{node * CPUS_PER_NODE}-{(node + 1) * CPUS_PER_NODE - 1}"}
                for node in range(numa_nodes)
            ],
        }
        for index, port in enumerate(ports)
    ]


def numa_nodes_of(numa_nodes: int) -> list[dict[str, Any]]:
    return [
        {"id": node, "cpus": f"{node * CPUS_PER_NODE}-{(node + 1) * CPUS_PER_NODE - 1}"} for node in range(numa_nodes)
    ]


def loopback_address(index: int) -> str:
    """Host `index`'s own loopback address, 127.1.0.1 on (all of 127/8 is loopback on Linux)."""
    return f"127.1.{index // 254}.{index % 254 + 1}"


def closed_port_on(addresses: list[str], first: int = FIRST_PORT) -> int:
    """One port where nothing accepts a connection at any of `addresses` (each refuses at once)."""
    for port in range(first, 65536):
        for address in addresses:
            with socket.socket() as probe:
                probe.settimeout(1)
                try:
                    probe.connect((address, port))
                except ConnectionRefusedError:
                    continue
                except OSError:
                    pass
                break  # open, or not plainly refused: the next port
        else:
            return port
    raise SystemExit(f"no port from {first} is closed on all of {len(addresses)} loopback addresses")


def class_hosts(count: int, numa_nodes: int) -> dict[str, Any]:
    """`count` hosts of one class, each its name, address, class and hostKey (docs/fleets.md): the
    class holds the NUMA nodes and the one closed SSH port every host's address refuses."""
    addresses = [loopback_address(index) for index in range(count)]
    port = closed_port_on(addresses)
    return {
        "hostClasses": {HOST_CLASS: {"sshPort": port, "numaNodes": numa_nodes_of(numa_nodes)}},
        "hosts": [
            {"name": f"node-{index:04d}", "address": address, "class": HOST_CLASS, "hostKey": fake_host_key(index)}
            for index, address in enumerate(addresses)
        ],
    }


def stack_config(ports: list[int], numa_nodes: int, key_path: Path) -> dict[str, Any]:
    """The standalone stack's config (namespace numa-kubelets): no cluster, so no demo."""
    return {"hosts": host_entries(ports, numa_nodes), "sshPrivateKeyPath": str(key_path)}


def token_kubeconfig(server: str) -> str:
    """The stack's credential: a kubeconfig with a token, at `server` (tests/e2e/test_engine_findings.py)."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "bench", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "bench", "user": {"token": "bench-credential-token"}}],
            "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
            "current-context": "bench",
        }
    )


def example_ca() -> str:
    """The example stack's CA certificate (its key discarded): a well-formed caCert."""
    stack_file = yaml.safe_load((PROJECT_DIR / "Pulumi.example-cluster.yaml").read_text())
    return str(stack_file["config"]["numa-kubelets:cluster"]["caCert"])


def cluster_config(server: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The cluster side of a --cluster stack: plain keys, and the secrets (set with --secret)."""
    plain = {"cluster": {"server": server, "caCert": example_ca(), "dns": CLUSTER_DNS}, "demo": {"enabled": False}}
    return plain, {"bootstrapToken": BOOTSTRAP_TOKEN, "kubeconfig": token_kubeconfig(server)}


class ConfigTooLarge(Exception):
    """The stack config would not fit in PULUMI_CONFIG: the case cannot run."""


def write_stack_file(path: Path, config: dict[str, Any], namespace: str) -> None:
    """The config's keys into the stack file, beside what `stack init` put there (the secrets'
    salt). JSON is YAML: the CLI reads it as the stack file."""
    document = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    document.setdefault("config", {}).update({f"{namespace}:{key}": value for key, value in config.items()})
    path.write_text(json.dumps(document, indent=1) + "\n")


def command_sizes(numa_nodes: int, key_path: Path) -> list[dict[str, Any]]:
    """Per command of one host, in registration order: the byte sizes of create, delete and stdin
    the program gives it (a mock evaluation of one host, in a subprocess)."""
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--sizes-child", str(numa_nodes), str(key_path)],
        capture_output=True,
        text=True,
        cwd=PROJECT_DIR,
        check=False,
    )
    if completed.returncode != 0:
        sys.stderr.write(completed.stderr)
        raise SystemExit("the mock evaluation of one host failed")
    sizes: list[dict[str, Any]] = json.loads(completed.stdout.strip().splitlines()[-1])
    return sizes


def sizes_child(numa_nodes: int, key_path: str) -> None:
    os.chdir(PROJECT_DIR)
    from tests.program.harness import run_program

    config = stack_config([FIRST_PORT], numa_nodes, Path(key_path))
    run = run_program(config, preview=True)
    sizes = [
        {
            "name": resource.name.removeprefix("node-0000-"),
            "create": len(resource.inputs.get("create") or ""),
            "delete": len(resource.inputs.get("delete") or ""),
            "stdin": len(resource.inputs.get("stdin") or ""),
        }
        for resource in run.commands()
    ]
    print(json.dumps(sizes))


BARE_PROGRAM = '''\
"""The engine's floor: flat command:remote:Command resources of the program's script sizes (bench/engine.py)."""

import json
from pathlib import Path

import pulumi
import pulumi_command as command

spec = json.loads(Path(__file__).with_name("bare.json").read_text())
key = pulumi.Output.secret(Path(spec["key"]).read_text())


def text(size: int, seed: str) -> str | None:
    """A shell comment of `size` bytes (None for 0): the script's bulk, run by nothing."""
    if size == 0:
        return None
    line = f"# {seed} " + "x" * 60 + "\\n"
    return (line * (size // len(line) + 1))[:size]


for port in spec["ports"]:
    connection = command.remote.ConnectionArgs(
        host="127.0.0.1", port=port, user="root", private_key=key, dial_error_limit=12, per_dial_timeout=10
    )
    for entry in spec["commands"]:
        name = f"{port}-{entry['name']}"
        command.remote.Command(
            name,
            connection=connection,
            create=text(entry["create"], name),
            delete=text(entry["delete"], name),
            stdin=text(entry["stdin"], name),
            add_previous_output_in_env=False,
        )
'''


@dataclass
class Stack:
    """One benchmark stack: a project directory and its own state directory."""

    kind: str
    hosts: int
    numa: int
    checkpoints: str
    directory: Path
    state: Path
    commands: int = 0
    cluster: bool = False
    classes: bool = False
    config_bytes: int = 0

    def env(self) -> dict[str, str]:
        env = realtools.pulumi_env(self.state)
        env[BENCHMARK_VARIABLE] = "1"
        env.pop("PULUMI_SKIP_CHECKPOINTS", None)
        if self.checkpoints == "skip":
            env["PULUMI_SKIP_CHECKPOINTS"] = "true"
        return env


def make_stack(
    kind: str, hosts: int, numa: int, checkpoints: str, scratch: Path, cluster: bool = False, classes: bool = False
) -> Stack:
    if kind != "program":
        cluster = classes = False  # the bare program has neither
    label = f"{kind}-{hosts}x{numa}-{checkpoints}" + ("-cluster" if cluster else "") + ("-classes" if classes else "")
    directory = scratch / label / "project"
    state = directory.parent / "state"
    directory.mkdir(parents=True)
    state.mkdir()
    key_path = directory.parent / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bench", "-f", str(key_path)], check=True)
    stack = Stack(kind, hosts, numa, checkpoints, directory, state, cluster=cluster, classes=classes)
    secrets: dict[str, str] = {}
    if kind == "program":
        for name in PROJECT_FILES:
            shutil.copy2(PROJECT_DIR / name, directory / name)
        for package in PROJECT_PACKAGES:
            shutil.copytree(PROJECT_DIR / package, directory / package, ignore=shutil.ignore_patterns("__pycache__"))
        if classes:
            config = {**class_hosts(hosts, numa), "sshPrivateKeyPath": str(key_path)}
        else:
            config = stack_config(closed_ports(hosts), numa, key_path)
        if cluster:
            # cluster.server and the credential's server: a loopback port where nothing listens.
            plain, secrets = cluster_config(f"https://127.0.0.1:{closed_ports(1, first=FIRST_PORT - 1000)[0]}")
            config.update(plain)
        # The language host passes the whole config in PULUMI_CONFIG (the secrets decrypted): past
        # Linux's limit on one environment string the program could not start (numa_kubelets/config_size.py).
        size = ConfigSize(pulumi_config_bytes({**config, **secrets}))
        stack.config_bytes = size.size
        print(f"{label}: {size.report()}", file=sys.stderr, flush=True)
        if size.level == "error":
            raise ConfigTooLarge(f"{hosts} x {numa}: {size.report()} (pulumi/pulumi#8680)")
        stack.commands = hosts * len(command_sizes(numa, key_path))
    else:
        ports = closed_ports(hosts)
        sizes = command_sizes(numa, key_path)
        (directory / "Pulumi.yaml").write_text(
            "name: numa-kubelets-bare\nruntime:\n  name: python\n  options:\n    toolchain: pip\n    virtualenv: .venv\n"
        )
        (directory / "__main__.py").write_text(BARE_PROGRAM)
        (directory / "bare.json").write_text(json.dumps({"key": str(key_path), "ports": ports, "commands": sizes}))
        stack.commands = hosts * len(sizes)
    (directory / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    _cli(stack, "stack", "init", STACK)
    if kind == "program":
        write_stack_file(directory / f"Pulumi.{STACK}.yaml", config, "numa-kubelets")
        for key, value in secrets.items():  # on stdin, as a user sets them (docs/configuration.md)
            _cli(stack, "config", "set", "--secret", f"numa-kubelets:{key}", stdin=value)
    return stack


def _cli(stack: Stack, *args: str, stdin: str = "") -> None:
    completed = subprocess.run(
        [str(realtools.TOOLS_BIN / "pulumi"), "--non-interactive", *args],
        cwd=stack.directory,
        env=stack.env(),
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"pulumi {' '.join(args[:2])} failed:\n{completed.stdout}\n{completed.stderr}")


# ---------------------------------------------------------------- one operation, watched


def _status(pid: int) -> dict[str, int]:
    """VmHWM and VmRSS of a process in KiB (absent for a zombie)."""
    values = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    key, value = line.split(":", 1)
                    values[key] = int(value.split()[0])
    except OSError:
        pass
    return values


def _descendants(root: int) -> dict[int, str]:
    """The processes under root (root included): pid -> command name, from /proc/*/stat."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        parents[int(entry)] = (ppid, name)
    tree = {root: parents.get(root, (0, "pulumi"))[1]}
    grown = True
    while grown:
        grown = False
        for pid, (ppid, name) in parents.items():
            if ppid in tree and pid not in tree:
                tree[pid] = name
                grown = True
    return tree


@dataclass
class Watch:
    """Polls the CLI's process tree until stopped."""

    root: int
    interval: float
    peak_kib: dict[int, int] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    tree_peak_kib: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid, name in _descendants(self.root).items():
                status = _status(pid)
                if not status:
                    continue
                self.names[pid] = name
                self.peak_kib[pid] = max(self.peak_kib.get(pid, 0), status.get("VmHWM", 0))
                total += status.get("VmRSS", 0)
            self.tree_peak_kib = max(self.tree_peak_kib, total)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()

    def peak_of(self, *prefixes: str) -> int:
        return max((kib for pid, kib in self.peak_kib.items() if self.names[pid].startswith(prefixes)), default=0)


def _summary(output: str) -> dict[str, int]:
    """The CLI's `Resources:` summary: change kind -> count (`+ 1076 to create`, `1076 unchanged`)."""
    counts: dict[str, int] = {}
    for match in re.finditer(
        r"^\s+(?:[+~\-]+\s+)?([\d,]+) (to create|created|to update|updated|unchanged|to delete|to replace)\b",
        output,
        re.MULTILINE,
    ):
        counts[match.group(2)] = int(match.group(1).replace(",", ""))
    return counts


ARGS = {
    "preview": ["preview"],
    "preview-diff": ["preview", "--diff"],
    "up": ["up", "--yes"],
    "preview-again": ["preview", "--expect-no-changes"],
    "reup": ["up", "--yes", "--expect-no-changes"],
}


def run_operation(stack: Stack, operation: str, poll: float, timeout: float) -> dict[str, Any]:
    output_path = stack.directory.parent / f"{operation}.out"
    command = [str(realtools.TOOLS_BIN / "pulumi"), "--non-interactive", *ARGS[operation], "--stack", STACK]
    with output_path.open("w") as output:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=stack.directory, env=stack.env(), stdout=output, stderr=subprocess.STDOUT
        )
        watch = Watch(process.pid, poll)
        watcher = threading.Thread(target=watch.run, daemon=True)
        watcher.start()
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        watch.stop()
        watcher.join()
    text = output_path.read_text(errors="replace")
    if process.returncode != 0:
        tail = "\n".join(text.splitlines()[-40:])
        raise SystemExit(
            f"pulumi {' '.join(ARGS[operation])} of {stack.kind} {stack.hosts}x{stack.numa} exited {process.returncode}:\n{tail}"
        )
    if DOUBLE_IDENTITY not in text or BENCHMARK_WARNING not in text:
        raise SystemExit(f"the run did not start the command double in its benchmark mode: see {output_path}")
    counts = _summary(text)
    return {
        "kind": stack.kind,
        "hosts": stack.hosts,
        "numa": stack.numa,
        "checkpoints": stack.checkpoints,
        "cluster": stack.cluster,
        "classes": stack.classes,
        "configBytes": stack.config_bytes,
        "operation": operation,
        "commands": stack.commands,
        "resources": max(counts.values(), default=0) if operation != "reup" else counts.get("unchanged", 0),
        "changes": counts,
        "seconds": round(seconds, 2),
        "cpuSeconds": round(usage.ru_utime + usage.ru_stime, 2),
        "cliPeakRssMiB": round(watch.peak_kib.get(process.pid, 0) / 1024, 1),
        "programPeakRssMiB": round(watch.peak_of("python") / 1024, 1),
        "treePeakRssMiB": round(watch.tree_peak_kib / 1024, 1),
        "waitedMaxRssMiB": round(usage.ru_maxrss / 1024, 1),
        "outputBytes": output_path.stat().st_size,
        "load": round(os.getloadavg()[0], 2),
    }


# ---------------------------------------------------------------- the grid and the table


def grid(args: argparse.Namespace) -> list[tuple[str, int, str]]:
    cases = []
    for hosts in args.hosts:
        for checkpoints in args.checkpoints:
            if checkpoints == "write" and hosts > args.max_hosts_writing_checkpoints:
                continue
            for kind in args.kinds:
                cases.append((kind, hosts, checkpoints))
    return cases


def stack_label(row: dict[str, Any]) -> str:
    """How the stack was written: standalone or with a cluster, hosts written out or with classes
    (rows of earlier runs, without these keys, were standalone and written out)."""
    return ("cluster" if row.get("cluster") else "standalone") + (", classes" if row.get("classes") else "")


def markdown(rows: list[dict[str, Any]]) -> str:
    header = (
        "| program | stack | hosts x NUMA | commands | resources | checkpoints | operation | wall s | CPU s "
        "| CLI peak RSS MiB | program peak RSS MiB | tree peak RSS MiB |\n"
        "|---|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|\n"
    )
    lines = [
        f"| {r['kind']} | {stack_label(r)} | {r['hosts']} x {r['numa']} | {r['commands']:,} | {r['resources']:,} "
        f"| {r['checkpoints']} | {r['operation']} | {r['seconds']:.1f} | {r['cpuSeconds']:.1f} "
        f"| {r['cliPeakRssMiB']:,.0f} | {r['programPeakRssMiB']:,.0f} | {r['treePeakRssMiB']:,.0f} |\n"
        for r in rows
    ]
    return header + "".join(lines)


def growth(rows: list[dict[str, Any]]) -> str:
    """The factor from each fleet size to the next, per program, stack, NUMA nodes, checkpoints
    and operation: of the hosts, the resources, wall time, CPU time and the CLI's peak RSS.

    Of several rows of one case (one measured again) the last counts. Linear growth reads the
    hosts' factor (100 -> 625 x 8: 6.25); '' when no case has two sizes. The rows may come from
    different runs (`--table` of a file several runs appended to): the machine's state is theirs.
    """
    cases: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for row in rows:
        key = (row["kind"], stack_label(row), row["numa"], row["checkpoints"], row["operation"])
        cases.setdefault(key, {})[row["hosts"]] = row
    lines = []
    for (kind, stack, numa, checkpoints, operation), by_hosts in cases.items():
        sizes = sorted(by_hosts)
        for small, large in itertools.pairwise(sizes):
            a, b = by_hosts[small], by_hosts[large]

            def factor(key: str, a: dict[str, Any] = a, b: dict[str, Any] = b) -> str:
                return f"{b[key] / a[key]:.2f}" if a.get(key) else "—"

            lines.append(
                f"| {kind} | {stack} | {checkpoints} | {operation} | {small} -> {large} x {numa} "
                f"| {large / small:.2f} | {factor('resources')} | {factor('seconds')} | {factor('cpuSeconds')} "
                f"| {factor('cliPeakRssMiB')} | {factor('programPeakRssMiB')} |\n"
            )
    if not lines:
        return ""
    header = (
        "\nGrowth (the factor from one fleet size to the next; linear growth reads the hosts' factor):\n\n"
        "| program | stack | checkpoints | operation | hosts | hosts x | resources x | wall x | CPU x "
        "| CLI peak RSS x | program peak RSS x |\n"
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n"
    )
    return header + "".join(lines)


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def _choices(allowed: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        values = tuple(part for part in text.split(",") if part)
        unknown = [value for value in values if value not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"{', '.join(unknown)}: not one of {', '.join(allowed)}")
        return values

    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--kinds", type=_choices(KINDS), default=KINDS, help="program,bare")
    parser.add_argument("--hosts", type=_numbers, default=(25, 100, 500), help="comma-separated fleet sizes")
    parser.add_argument("--numa", type=int, default=8, help="NUMA nodes per host (8 CPUs each)")
    parser.add_argument("--checkpoints", type=_choices(CHECKPOINTS), default=CHECKPOINTS, help="write,skip")
    parser.add_argument(
        "--max-hosts-writing-checkpoints",
        type=int,
        default=100,
        help="larger fleets run with checkpoints skipped only (default 100: 500 x 8 with them takes hours)",
    )
    parser.add_argument(
        "--max-hosts-up-writing-checkpoints",
        type=int,
        default=25,
        help="larger fleets writing checkpoints are previewed only (default 25: 100 x 8 takes over an hour and 20 GB)",
    )
    parser.add_argument("--ops", type=_choices(OPERATIONS), default=DEFAULT_OPS, help=", ".join(OPERATIONS))
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between polls of the process tree")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds an operation may take before it is killed")
    parser.add_argument("--jsonl", metavar="PATH", help="append each operation's row as JSON as it ends")
    parser.add_argument("--keep", metavar="DIR", help="keep the projects, states and CLI outputs in DIR")
    parser.add_argument("--table", metavar="JSONL", help="only print the table of the rows in this file")
    parser.add_argument(
        "--classes",
        action="store_true",
        help="write the program's hosts with one host class (name, address, class, hostKey each)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="the program's stack joins a cluster (at a closed loopback port, offline): preview and preview-diff only",
    )
    parser.add_argument("--sizes-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sizes_child:
        sizes_child(int(args.sizes_child[0]), args.sizes_child[1])
        return 0
    if args.table:
        rows = [json.loads(line) for line in Path(args.table).read_text().splitlines() if line.strip()]
        sys.stdout.write(markdown(rows) + growth(rows))
        return 0
    if ("preview-again" in args.ops or "reup" in args.ops) and "up" not in args.ops:
        parser.error("preview-again and reup need up")
    if args.cluster and (applying := [op for op in args.ops if op not in ("preview", "preview-diff")]):
        parser.error(
            f"--cluster runs preview and preview-diff only, not {', '.join(applying)}: an up of a cluster stack "
            "needs a reachable API server and kubelets that join (the module's docstring says why)"
        )
    args.ops = tuple(op for op in OPERATIONS if op in args.ops)  # in their order
    realtools.require("pulumi", "pulumi-language-python")
    realtools.require_plugin("command", realtools.pins()["pulumi-command"])
    if args.cluster:
        realtools.require_plugin("kubernetes", realtools.pins()["pulumi-kubernetes"])

    started = time.perf_counter()
    rows = []
    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="numa-kubelets-engine-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        for kind, hosts, checkpoints in grid(args):
            try:
                stack = make_stack(kind, hosts, args.numa, checkpoints, scratch, args.cluster, args.classes)
            except ConfigTooLarge as error:
                print(f"{kind} {hosts}x{args.numa} checkpoints {checkpoints}: not run: {error}", file=sys.stderr)
                continue
            for operation in args.ops:
                if (
                    checkpoints == "write"
                    and operation in ("up", "preview-again", "reup")
                    and hosts > args.max_hosts_up_writing_checkpoints
                ):
                    print(
                        f"{kind} {hosts}x{args.numa} checkpoints write: {operation} and what follows not run "
                        f"(--max-hosts-up-writing-checkpoints {args.max_hosts_up_writing_checkpoints})",
                        file=sys.stderr,
                    )
                    break
                row = run_operation(stack, operation, args.poll, args.timeout)
                rows.append(row)
                print(
                    f"{kind} {hosts}x{args.numa} checkpoints {checkpoints}: {operation} {row['seconds']:.1f} s, "
                    f"CLI {row['cliPeakRssMiB']:.0f} MiB, {row['resources']} resources",
                    file=sys.stderr,
                    flush=True,
                )
                if args.jsonl:
                    with open(args.jsonl, "a") as jsonl:
                        jsonl.write(json.dumps(row) + "\n")
            if not args.keep:
                shutil.rmtree(stack.directory.parent)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    sys.stdout.write(markdown(rows) + growth(rows))
    sys.stdout.write(
        f"\n{os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.1f}; "
        f"whole benchmark {time.perf_counter() - started:.0f} s.\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
