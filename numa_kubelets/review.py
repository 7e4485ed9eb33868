"""The plan as files, for pull-request review without a Pulumi backend.

`render_stack(document)` turns a stack file (`Pulumi.<stack>.yaml`, parsed) into every file
and script each host would receive, as a mapping of relative path -> text:

    summary.md                                   every kubelet: host, NUMA node, CPUs, ports, ...; each
                                                 host's partition as a picture (Mermaid)
    <host>/index.md                              the host's remote commands and what each installs
    <host>/files/<on-host path>                  each rendered file, at its path on the host
    <host>/scripts/<resource>.apply.sh           each remote command's create/update script
    <host>/scripts/<resource>.delete.sh          ... and its delete script
    cluster/nodes/<node>.yaml                    with a cluster: the labels and taints the stack keeps on each Node
    demo/namespace.yaml, demo/serviceaccount.yaml, demo/pods/numa-demo-<node>.yaml
                                                 the demo's Kubernetes objects, when enabled (a pod's
                                                 name carries a hash of its spec; its file's does not,
                                                 so a changed pod shows as a diff of one file)

The content comes from the core's own render and script functions, so it is what `pulumi up`
would send. Output is deterministic (sorted, no timestamps). Secret values are never written:
the bootstrap kubeconfig carries `<secret: numa-kubelets:bootstrapToken>` instead of the
token; encrypted (`secure:`) stack values are present-but-unknown and validated with
syntactically valid stand-ins that never reach a file.

Everything above is pure. The I/O (`write_tree`, which also removes files a previous render
wrote and this one does not, and `main`) is at the bottom:

    python -m numa_kubelets.review render Pulumi.dev.yaml --out plan-out/dev
    python -m numa_kubelets.review check Pulumi.dev.yaml     # validate, and the config's size

Both say how much of Linux's limit on one environment string the stack config takes as the
language host passes it (config_size.py): a warning from 75 %, an error past it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import yaml

from . import generic_plugin, placement, render, scripts
from .cluster import registration_labels
from .config import NAMESPACE, SECRET_KEYS, ConfigError, StackConfig, load_stack_values
from .config_size import stack_config_size
from .picture import host_picture_markdown
from .plan import ClusterPlan, HostPlan, KubeletPlan, Plan, build_plan
from .render import HostFile

_T = TypeVar("_T")

# Stand-ins for encrypted values, for validation only: they are never written out.
_STAND_INS = {
    "bootstrapToken": "aaaaaa.aaaaaaaaaaaaaaaa",
    "sshPrivateKey": "stand-in for an encrypted SSH private key",
    "kubeconfig": "stand-in for an encrypted kubeconfig",
}
MANAGED_TOKEN_PLACEHOLDER = "<secret: bootstrap token the stack creates>"
KUBE_DNS_PLACEHOLDER = "<clusterIP of kube-system/kube-dns>"
MANIFEST = ".numa-kubelets-plan"
SUMMARY = "summary.md"


def secret_placeholder(key: str) -> str:
    return f"<secret: {NAMESPACE}:{key}>"


class StackFileError(ValueError):
    """The stack file is not a Pulumi stack settings document."""


# ---------------------------------------------------------------- stack file -> config values


def _is_secure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"secure"}


def _replace_secure(value: Any, key: str) -> Any:
    """Encrypted values nested in objects become placeholders (validation then reports them if they cannot be)."""
    if _is_secure(value):
        return secret_placeholder(key)
    if isinstance(value, Mapping):
        return {k: _replace_secure(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_secure(v, key) for v in value]
    return value


def _as_pulumi_string(value: Any) -> str:
    """Pulumi hands every config value to the program as a string; objects and lists as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value)


@dataclass(frozen=True)
class StackValues:
    values: dict[str, str]  # namespace key (no prefix) -> value as the program sees it
    secure: tuple[str, ...]  # keys whose value is encrypted in the file (or assumed set elsewhere)


def stack_values(document: Any, assume_secrets: tuple[str, ...] = ()) -> StackValues:
    """The `numa-kubelets:*` values of a parsed stack file.

    Keys without a namespace belong to the project (`numa-kubelets`); other namespaces are
    ignored. `assume_secrets` names secret keys set outside the file (`pulumi config set
    --secret` on another machine, an ESC environment): they count as present but unknown.
    """
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise StackFileError("a stack file is a YAML mapping with a 'config' key")
    config = document.get("config") or {}
    if not isinstance(config, Mapping):
        raise StackFileError("'config' must be a mapping of keys to values")
    values: dict[str, str] = {}
    secure: set[str] = set()
    for full_key, value in config.items():
        full_key = str(full_key)
        namespace, _, key = full_key.rpartition(":")
        if (namespace or NAMESPACE) != NAMESPACE:
            continue
        if _is_secure(value):
            secure.add(key)
            values[key] = _STAND_INS.get(key, secret_placeholder(key))
            continue
        replaced = _replace_secure(value, key)
        if replaced != value:
            secure.add(key)
        values[key] = _as_pulumi_string(replaced)
    for key in assume_secrets:
        if key not in SECRET_KEYS:
            raise StackFileError(f"--assume-secret {key}: not a secret key (one of {', '.join(SECRET_KEYS)})")
        if key not in values:
            secure.add(key)
            values[key] = _STAND_INS[key]
    return StackValues(dict(sorted(values.items())), tuple(sorted(secure)))


def plan_from_stack(document: Any, assume_secrets: tuple[str, ...] = ()) -> tuple[StackConfig, Plan]:
    """Validate the stack file's values as the program does (components/stack_config.read_stack);
    raise ConfigError with every problem."""
    stack = stack_values(document, assume_secrets)
    # A secret in plain text in the file is refused as `pulumi up` refuses it.
    config = load_stack_values(stack.values, stack.secure)
    plan = build_plan(config)
    placement.check_demo(config, plan)
    if plan.cluster is not None and plan.cluster.dns is None:
        # The program reads it from the cluster; a review has no cluster to ask.
        plan = dataclasses.replace(plan, cluster=dataclasses.replace(plan.cluster, dns=KUBE_DNS_PLACEHOLDER))
    return config, plan


# ---------------------------------------------------------------- plan -> remote commands


@dataclass(frozen=True)
class RemoteCommandPlan:
    """One `command:remote:Command` of the program: its name, scripts and the files it installs."""

    name: str
    component: str  # the component resource it belongs to (type token name, resource name)
    scripts: scripts.HostScripts
    files: tuple[HostFile, ...]
    with_delete: bool = True
    stdin: str | None = None  # what arrives on stdin, described
    stdin_file: HostFile | None = None  # ... when it is a secret file (rendered with a placeholder)


def host_commands(host: HostPlan, plan: Plan, demo_pods: tuple[placement.DemoPod, ...] = ()) -> list[RemoteCommandPlan]:
    """The host's remote commands, with the plan's resource names, in the order the components in
    components/ create them: the host layer, then the demo probes of the host's kubelets."""
    commands = [
        RemoteCommandPlan(
            host.preflight_command,
            f"NumaHost {host.name}",
            scripts.preflight_scripts(host, plan),
            (),
            with_delete=False,
        ),
        RemoteCommandPlan(
            host.host_services_command,
            f"NumaHost {host.name}",
            scripts.host_services_scripts(host),
            tuple(render.host_service_dropins(host)),
        ),
    ]
    for kubelet in host.kubelets:
        base = kubelet.resource_name
        if kubelet.network is not None:
            commands.append(
                RemoteCommandPlan(
                    kubelet.netns_command,
                    f"KubeletInstance {base}",
                    scripts.netns_scripts(host, kubelet),
                    tuple(render.netns_files(kubelet.network)),
                )
            )
        commands.append(
            RemoteCommandPlan(
                kubelet.slice_command,
                f"NumaSlice {base}",
                scripts.slice_scripts(host, kubelet),
                (render.slice_unit(kubelet),),
            )
        )
        commands.append(
            RemoteCommandPlan(
                kubelet.containerd_command,
                f"KubeletInstance {base}",
                scripts.containerd_scripts(host, kubelet, plan),
                tuple(render.containerd_files(kubelet, plan)),
            )
        )
        commands.append(
            RemoteCommandPlan(
                kubelet.kubelet_command,
                f"KubeletInstance {base}",
                scripts.kubelet_scripts(host, kubelet, plan),
                tuple(render.kubelet_files(kubelet, plan)),
                **_bootstrap_kubeconfig(kubelet, plan),
            )
        )
        if kubelet.generic_plugins:
            commands.append(
                RemoteCommandPlan(
                    kubelet.device_plugins_command,
                    f"KubeletInstance {base}",
                    scripts.device_plugin_scripts(host, kubelet),
                    tuple(
                        f for plugin in kubelet.generic_plugins for f in generic_plugin.plugin_files(kubelet, plugin)
                    ),
                )
            )
    for pod in demo_pods:
        if pod.kubelet.host == host.name:
            commands.append(
                RemoteCommandPlan(
                    pod.probe_name,
                    f"DemoPlacement {pod.resource_name}",
                    placement.probe_scripts(pod, host, plan),
                    (),
                    with_delete=False,
                    stdin="the pod's uid (from the API, after the pod is ready)",
                )
            )
    return commands


def _bootstrap_kubeconfig(kubelet: KubeletPlan, plan: Plan) -> dict[str, Any]:
    if plan.cluster is None:
        return {}
    content = scripts.bootstrap_kubeconfig_stdin(kubelet, plan, bootstrap_token_placeholder(plan))
    path = kubelet.layout.bootstrap_kubeconfig
    return {"stdin": f"`{path}` (secret, 0600)", "stdin_file": HostFile(path, content, mode="0600")}


# ---------------------------------------------------------------- commands -> review files


def unwrap_sudo(script: str, user: str) -> str:
    """A non-root SSH user's script is one `sudo -n /bin/sh -c '<script>'` line: show the script."""
    if user == "root":
        return script
    argv = shlex.split(script)
    if argv[:4] != ["sudo", "-n", "/bin/sh", "-c"] or len(argv) != 5 or scripts.run_as(user, argv[4]) != script:
        raise ValueError("unexpected form of a sudo-wrapped script")
    return f"# (review) sent as: sudo -n /bin/sh -c '<this script>' by SSH user {user}\n" + argv[4]


def apply_script(host_scripts: scripts.HostScripts, user: str) -> str:
    """The script a command's create runs: its command line, or what that line reads on stdin."""
    if host_scripts.stdin is None:
        return unwrap_sudo(host_scripts.apply, user)
    if host_scripts.apply != scripts.run_as_reading_stdin(user):
        raise ValueError("unexpected command line of a script on stdin")
    by = "" if user == "root" else f" by SSH user {user}"
    return f"# (review) sent on stdin to `{host_scripts.apply}`{by}\n" + host_scripts.stdin


def _host_relative(path: str) -> str:
    relative = PurePosixPath(path).relative_to("/")
    if ".." in relative.parts:
        raise ValueError(f"{path}: not a plain absolute path")
    return str(relative)


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|")


def _network_lines(host: HostPlan) -> list[str]:
    """Namespace mode only: host mode is what the kubelets always did."""
    if host.network is None:
        return []
    lines = [
        f"- network: one namespace per kubelet, uplink {host.network.uplink}"
        + (f" on {host.network.parent}" if host.network.parent else "")
        + f", gateway {host.network.gateway}"
        + (f", MTU {host.network.mtu}" if host.network.mtu else "")
        + (f", DNS {' '.join(host.network.dns)}" if host.network.dns else ", DNS: the host's resolv.conf")
        + "\n",
        f"  - private paths (containerd's view): {', '.join(host.network.private_paths) or 'none'}\n",
    ]
    for kubelet in host.kubelets:
        if kubelet.network is not None:
            lines.append(f"  - {kubelet.network.netns} ({kubelet.node_name}): {kubelet.network.describe()}\n")
    return lines


def host_index(host: HostPlan, commands: list[RemoteCommandPlan]) -> str:
    lines = [
        f"# Host {host.name}\n",
        "\n",
        f"- address: {host.address}, SSH port {host.ssh_port}, user {host.user}\n",
        f"- host key: {'pinned' if host.host_key else 'not pinned'}\n",
        "- NUMA nodes: " + ", ".join(f"{node_id} (CPUs {cpus or 'none'})" for node_id, cpus in host.numa_nodes) + "\n",
        f"- system CPUs (system.slice, init.scope, user.slice): {host.system_cpus}, memory nodes {host.system_mems}\n",
        *_network_lines(host),
        "\n",
        "## Remote commands\n",
        "\n",
        "In the order the program creates them. Each is one SSH session per apply when its inputs change.\n",
        "\n",
        "| resource | component | installs (mode) | stdin | scripts |\n",
        "|---|---|---|---|---|\n",
    ]
    for command in commands:
        installs = "<br>".join(f"`{f.path}` ({f.mode})" for f in command.files) or "-"
        stdin = command.stdin or (
            f"its apply script, read by `{command.scripts.apply}`" if command.scripts.stdin else "-"
        )
        script_files = f"scripts/{command.name}.apply.sh"
        if command.with_delete:
            script_files += f"<br>scripts/{command.name}.delete.sh"
        lines.append(f"| {command.name} | {command.component} | {installs} | {stdin} | {script_files} |\n")
    return "".join(lines)


def _manifest_yaml(document: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(document), sort_keys=False, default_flow_style=False)


def bootstrap_token_placeholder(plan: Plan) -> str:
    if plan.cluster is not None and plan.cluster.managed_bootstrap_token:
        return MANAGED_TOKEN_PLACEHOLDER
    return secret_placeholder("bootstrapToken")


def _own_kubelet_binaries(plan: Plan) -> list[str]:
    """Kubelets that run another binary or version than the stack's (a canary), one line each."""
    return [
        f"- kubelet {kubelet.node_name} runs its own binary: {kubelet.kubelet_path} ({kubelet.kubelet_version})\n"
        for kubelet in plan.kubelets
        if (kubelet.kubelet_path, kubelet.kubelet_version) != (plan.kubelet_path, plan.kubelet_version)
    ]


def _rollout_summary(plan: Plan) -> str:
    limit = plan.rollout.max_unavailable
    at_once = "all at once" if limit is None else f"at most {limit} kubelet(s) at once"
    return f"{at_once}, {'drained first' if plan.rollout.drain else 'not drained'}"


def _unpinned_hosts(plan: Plan) -> list[str]:
    """Only a stack with insecureSkipHostKeyCheck has hosts without a pinned key: say so up front."""
    unpinned = [host.name for host in plan.hosts if host.host_key is None]
    if not unpinned:
        return []
    return [
        f"- SSH host keys: not pinned for {', '.join(unpinned)} (insecureSkipHostKeyCheck: true): any key that "
        "answers is accepted\n"
    ]


def summary(plan: Plan) -> str:
    if plan.cluster is not None:
        target = f"joins the cluster at {plan.cluster.server} (bootstrap token: {bootstrap_token_placeholder(plan)})"
    else:
        target = "standalone kubelets (no cluster)"
    lines = [
        "# numa-kubelets plan\n",
        "\n",
        f"- kubelets: {target}\n",
        f"- demo pods: {'enabled' if plan.demo_enabled else 'disabled'}\n",
        f"- kubelet binary: {plan.kubelet_path} ({plan.kubelet_version}); containerd binary: {plan.containerd_path}\n",
        *_own_kubelet_binaries(plan),
        f"- rolling changes: {_rollout_summary(plan)}\n",
        *_unpinned_hosts(plan),
        f"- pod sandbox image: {plan.sandbox_image or 'containerd default'}\n",
        f"- {len(plan.hosts)} host(s), {len(plan.kubelets)} kubelet(s)\n",
        "\n",
        "| host | NUMA node | CPUs | memory node | port | healthz port | read-only port | node name | slice | labels |\n",
        "|---|---:|---|---|---:|---:|---:|---|---|---|\n",
    ]
    for host in sorted(plan.hosts, key=lambda h: h.name):
        for kubelet in sorted(host.kubelets, key=lambda k: k.numa_node):
            labels = ", ".join(f"{key}={value}" for key, value in kubelet.labels)
            lines.append(
                f"| {host.name} | {kubelet.numa_node} | {kubelet.cpus} | {kubelet.mems} | {kubelet.port} "
                f"| {kubelet.healthz_port} | {kubelet.read_only_port or 'off'} | {kubelet.node_name} "
                f"| {kubelet.layout.slice} | {_cell(labels)} |\n"
            )
    lines += _device_lines(plan)
    for host in sorted(plan.hosts, key=lambda h: h.name):
        lines += ["\n", f"## Partition of host {host.name}\n", "\n", host_picture_markdown(host)]
    return "".join(lines)


def _device_lines(plan: Plan) -> list[str]:
    """Which Node advertises which PCI devices, under which resource; nothing for a stack without."""
    rows = [
        f"| {host.name} | {kubelet.node_name} | {resource.resource} | {resource.plugin} "
        f"| {_cell(', '.join(resource.addresses))} |\n"
        for host in sorted(plan.hosts, key=lambda h: h.name)
        for kubelet in sorted(host.kubelets, key=lambda k: k.numa_node)
        for resource in kubelet.devices
    ]
    if not rows:
        return []
    return [
        "\n",
        "## Devices\n",
        "\n",
        "| host | node name | resource | plugin | PCI devices |\n",
        "|---|---|---|---|---|\n",
        *rows,
    ]


def render_plan(config: StackConfig, plan: Plan) -> dict[str, str]:
    """Every review file of the plan: relative path -> content, sorted by path."""
    files: dict[str, str] = {SUMMARY: summary(plan)}
    pods = placement.demo_pods(config, plan)
    if pods:
        files["demo/namespace.yaml"] = _manifest_yaml(placement.namespace_manifest(config.demo.namespace))
        files["demo/serviceaccount.yaml"] = _manifest_yaml(placement.service_account_manifest(config.demo.namespace))
        for pod in pods:
            files[f"demo/pods/{pod.resource_name}.yaml"] = _manifest_yaml(pod.manifest())
    if plan.cluster is not None:
        for kubelet in plan.kubelets:
            files[f"cluster/nodes/{kubelet.node_name}.yaml"] = _manifest_yaml(node_review(kubelet, plan.cluster))
    for host in plan.hosts:
        commands = host_commands(host, plan, pods)
        files[f"{host.name}/index.md"] = host_index(host, commands)
        for command in commands:
            files[f"{host.name}/scripts/{command.name}.apply.sh"] = apply_script(command.scripts, host.user)
            if command.with_delete:
                files[f"{host.name}/scripts/{command.name}.delete.sh"] = unwrap_sudo(command.scripts.delete, host.user)
            for host_file in (*command.files, *((command.stdin_file,) if command.stdin_file else ())):
                path = f"{host.name}/files/{_host_relative(host_file.path)}"
                if files.get(path, host_file.content) != host_file.content:
                    raise ValueError(f"{host.name}: two different contents for {host_file.path}")
                files[path] = host_file.content
    return dict(sorted(files.items()))


def node_review(kubelet: KubeletPlan, cluster_plan: ClusterPlan) -> dict[str, Any]:
    """What the stack keeps true of a kubelet's Node in the cluster (ClusterNode)."""
    removal = (
        f"cordon, drain (at most {cluster_plan.drain_timeout_seconds}s), delete"
        if cluster_plan.remove_nodes
        else "keep the Node, take the stack's taints off"
    )
    return {
        "node": kubelet.node_name,
        "registersWith": {"labels": registration_labels(kubelet, cluster_plan)},
        "readyWithin": f"{cluster_plan.node_ready_timeout_seconds}s",
        "labels": kubelet.label_map,
        "taints": [taint.manifest() for taint in kubelet.taints],
        "whenTheKubeletLeaves": removal,
    }


def render_stack(document: Any, assume_secrets: tuple[str, ...] = ()) -> dict[str, str]:
    """Stack file (parsed YAML) -> review files. Raises ConfigError or StackFileError."""
    return render_plan(*plan_from_stack(document, assume_secrets))


# ---------------------------------------------------------------- I/O: the output directory and the CLI


class OutputDirError(RuntimeError):
    pass


def write_tree(out: Path, files: Mapping[str, str]) -> None:
    """Make `out` hold exactly `files` plus the manifest; files of a previous render that are no
    longer part of the plan are deleted (and directories they leave empty). Files this renderer
    did not write are left alone; a non-empty directory without a manifest is refused."""
    manifest = out / MANIFEST
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not manifest.is_file():
        raise OutputDirError(
            f"{out} is not empty and holds no {MANIFEST}: not a plan directory, refusing to write there"
        )
    previous = manifest.read_text().splitlines() if manifest.is_file() else []
    for relative in sorted(set(previous) - set(files)):
        if not relative or relative.startswith("/") or ".." in PurePosixPath(relative).parts:
            continue  # a tampered manifest must not reach outside `out`
        stale = out / relative
        if stale.is_file() or stale.is_symlink():
            stale.unlink()
        parent = stale.parent
        while parent != out and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    for relative, content in files.items():
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode()
        if not (target.is_file() and target.read_bytes() == data):
            target.write_bytes(data)
    manifest.write_text("".join(f"{relative}\n" for relative in sorted(files)))


def _read_stack_file(stack_file: Path) -> Any:
    """The parsed stack file; OSError or yaml.YAMLError when it cannot be read."""
    return yaml.safe_load(stack_file.read_text())


def _size_fits(stack_file: Path, document: Any) -> bool:
    """Say how much of the config ceiling the stack takes (a warning from 75%); False past it."""
    size = stack_config_size(document)
    print(f"{stack_file}: {size.report()}", file=sys.stdout if size.level == "ok" else sys.stderr)
    return size.level != "error"


def _checked_stack(args: argparse.Namespace, evaluate: Callable[[dict[str, Any]], _T]) -> tuple[int, _T | None]:
    """Reads the stack file, reports its config's size, evaluates it: (exit status, result). The
    status is 2 for an unreadable file, 1 for invalid config or a config past the size limit."""
    stack_file = Path(args.stack_file)
    try:
        document = _read_stack_file(stack_file)
    except (OSError, yaml.YAMLError) as error:
        print(f"{stack_file}: {error}", file=sys.stderr)
        return 2, None
    fits = _size_fits(stack_file, document)
    try:
        result = evaluate(document)
    except (ConfigError, StackFileError) as error:
        print(f"{stack_file}: {error}", file=sys.stderr)
        return 1, None
    return (0, result) if fits else (1, None)


def _check_command(args: argparse.Namespace) -> int:
    status, plan = _checked_stack(args, lambda document: plan_from_stack(document, tuple(args.assume_secret))[1])
    if plan is None:
        return status
    print(f"{args.stack_file}: valid: {len(plan.hosts)} host(s), {len(plan.kubelets)} kubelet(s)")
    return 0


def _render_command(args: argparse.Namespace) -> int:
    status, files = _checked_stack(args, lambda document: render_stack(document, tuple(args.assume_secret)))
    if files is None:
        return status
    stack_file = Path(args.stack_file)
    out = (
        Path(args.out) if args.out else Path("plan-out") / stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    )
    try:
        write_tree(out, files)
    except (OutputDirError, OSError) as error:
        print(f"{out}: {error}", file=sys.stderr)
        return 2
    print(f"{stack_file}: wrote {len(files)} files to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m numa_kubelets.review", description="Plan review files for a stack."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    render_parser = commands.add_parser("render", help="write every file and script each host would receive")
    render_parser.add_argument("--out", help="output directory (default: plan-out/<stack>)")
    check_parser = commands.add_parser(
        "check",
        help="validate the stack file as `pulumi preview` would, and say how much of the 128 KiB the language "
        "host can pass the program its config takes",
    )
    for command_parser in (render_parser, check_parser):
        command_parser.add_argument("stack_file", help="a stack settings file, e.g. Pulumi.dev.yaml")
        command_parser.add_argument(
            "--assume-secret",
            action="append",
            default=[],
            choices=SECRET_KEYS,
            help="a secret set outside the stack file (e.g. an ESC environment): present but unknown; repeatable",
        )
    args = parser.parse_args(argv)
    return _check_command(args) if args.command == "check" else _render_command(args)


if __name__ == "__main__":
    sys.exit(main())
