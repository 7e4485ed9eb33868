"""Each kubelet's generic device plugins, as units on its host (issue 43 item 3).

One `github.com/squat/generic-device-plugin` process per kubelet and resource domain (the plugin
takes one `--domain`; devices.generic_plugin_instances), in the kubelet's slice, registering in
that kubelet's own device-plugins directory on the host (`KubeletLayout.device_plugins_dir`,
which the kubelet sees at the hard-coded `/var/lib/kubelet/device-plugins` in its own mount
namespace).

Its devices are the device nodes of exactly that kubelet's PCI devices, found on the host at
each start through sysfs, never by name (NVMe names do not follow the NUMA layout): every
`uevent` with a `DEVNAME=` below `/sys/bus/pci/devices/<address>/` (the controller's char device
at `nvme/nvme0/uevent`, its namespaces' block devices at `nvme/nvme0/nvme0n1/uevent`), filtered
by the resource's `deviceNodes` globs. One group per PCI device: one schedulable unit each.

Re-registration: a starting kubelet deletes every socket in its device-plugins directory. The
plugin checks its own socket every second and, once it is gone, serves and registers again
(within about 5 s: `runOnce` fails, `Run` retries after `restartInterval`; deviceplugin/plugin.go
of the pinned version). So its unit is not bound to the kubelet's: a kubelet restart does not
restart the plugin, and a plugin restart (a change of its devices) does not restart the kubelet.
"""

from __future__ import annotations

import shlex

from .devices import GenericPluginInstance
from .plan import KubeletPlan
from .render import HEADER, HostFile

q = shlex.quote

SYSFS = "/sys"
UNIT_PREFIX = "numa-device-plugin@"
RUNTIME_DIR = "/run/numa-kubelets"
# The plugin serves /health and /metrics over HTTP (`--listen`, default :8080, which every instance
# would then share). Port 0: the kernel gives each instance a free port of its own, on loopback.
LISTEN = "127.0.0.1:0"
# Device node names a resolver accepts from the kernel: nothing that needs quoting in YAML.
DEVNAME_CHARSET = "A-Za-z0-9._+:/-"


def instance_key(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> str:
    """`numa<N>-<domain>`: a valid unit instance name (a domain is a DNS-1123 subdomain: [a-z0-9.-];
    a generic resource's name fits the plugin's socket path, devices.py, so at most 36 bytes)."""
    return f"{kubelet.layout.instance}-{plugin.domain}"


def unit_name(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> str:
    return f"{UNIT_PREFIX}{instance_key(kubelet, plugin)}.service"


def unit_path(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> str:
    return f"/etc/systemd/system/{unit_name(kubelet, plugin)}"


def unit_glob(kubelet: KubeletPlan) -> str:
    """Every plugin unit file of this kubelet, for the removal of those no longer planned."""
    return f"/etc/systemd/system/{UNIT_PREFIX}{kubelet.layout.instance}-*.service"


def resolver_path(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> str:
    domain_key = instance_key(kubelet, plugin).removeprefix(f"{kubelet.layout.instance}-")
    return f"{kubelet.layout.config_dir}/device-plugin-{domain_key}.sh"


def config_path(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> str:
    """Written by the resolver at each start: what the host has now, under /run."""
    domain_key = instance_key(kubelet, plugin).removeprefix(f"{kubelet.layout.instance}-")
    return f"{RUNTIME_DIR}/{kubelet.layout.instance}/device-plugin-{domain_key}.yaml"


def unit_names(kubelet: KubeletPlan) -> tuple[str, ...]:
    return tuple(unit_name(kubelet, plugin) for plugin in kubelet.generic_plugins)


# --------------------------------------------------------------------------- the resolver


RESOLVER_FUNCTIONS = f"""\
# device_nodes ROOT ADDRESS: the device nodes the PCI device owns, as /dev paths, one a line,
# sorted; from each uevent's DEVNAME below its sysfs directory (not below a PCI device under it).
device_nodes() {{
  find "$1/bus/pci/devices/$2/" -mindepth 1 -maxdepth 5 \\
    -name '[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7]' -prune -o \\
    -name uevent -type f -print 2>/dev/null |
    while read -r uevent; do sed -n 's/^DEVNAME=//p' "$uevent"; done |
    sed 's|^|/dev/|' | sort -u
}}
# group ROOT ADDRESS RESOURCE PATTERNS: one group of the plugin's config, the device's nodes that
# match PATTERNS (a shell function: matches NODE); fails naming the device without one.
group() {{
  nodes=$(device_nodes "$1" "$2" | while read -r node; do if "$4" "$node"; then echo "$node"; fi; done)
  if [ -z "$nodes" ]; then
    echo "numa-kubelets: PCI device $2 ($1/bus/pci/devices/$2) has no device node for resource $3" >&2
    return 1
  fi
  echo "      - paths:"
  for node in $nodes; do
    case "$node" in
      (*[!{DEVNAME_CHARSET}]*)
        echo "numa-kubelets: PCI device $2 has a device node with an unexpected name: $node" >&2
        return 1;;
    esac
    echo "          - path: \\"$node\\""
  done
  echo "        count: 1"
}}
"""


def _matcher(name: str, globs: tuple[str, ...]) -> str:
    """A shell function: true when its argument matches one of `globs` (config-validated to
    letters, digits, '.', '_', '+', '-', '/' and the glob characters: safe unquoted in `case`)."""
    if not globs:
        return f"{name}() {{ :; }}\n"
    return f'{name}() {{ case "$1" in ({"|".join(globs)}) return 0;; esac; return 1; }}\n'


def resolver_shell(kubelet: KubeletPlan, plugin: GenericPluginInstance, sysfs: str, output: str) -> str:
    """Writes the plugin's config for `plugin` to `output` atomically, from the sysfs below `sysfs`
    (`/sys` on a host; a directory of a test's own otherwise)."""
    body = [f"root={q(sysfs)}\n", f"config={q(output)}\n", RESOLVER_FUNCTIONS]
    steps = []
    for index, resource in enumerate(plugin.resources):
        matcher = f"matches_{index}"
        body.append(_matcher(matcher, resource.device_nodes))
        steps.append(f"  echo {q('  - name: ' + resource.name)}\n")
        steps.append("  echo '    groups:'\n")
        steps += [f'  group "$root" {q(address)} {q(resource.resource)} {matcher}\n' for address in resource.addresses]
    body += [
        'mkdir -p "$(dirname "$config")"\n',
        "{\n",
        "  echo 'devices:'\n",
        *steps,
        '} > "$config.tmp"\n',
        'mv -f "$config.tmp" "$config"\n',
    ]
    return "".join(body)


def resolver_script(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> HostFile:
    """The plugin unit's ExecStartPre: its config, from the host's sysfs at each start."""
    return HostFile(
        resolver_path(kubelet, plugin),
        "#!/bin/sh\n"
        + HEADER
        + f"# The config of the generic device plugin for {plugin.domain} on kubelet {kubelet.node_name}: the\n"
        + "# device nodes of its PCI devices, found through sysfs (device names do not follow NUMA nodes).\n"
        + "set -eu\n"
        + resolver_shell(kubelet, plugin, SYSFS, config_path(kubelet, plugin)),
        mode="0755",
    )


def exec_start(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> str:
    arguments = [
        kubelet.generic_device_plugin_path,
        "--config",
        config_path(kubelet, plugin),
        "--domain",
        plugin.domain,
        "--plugin-directory",
        kubelet.layout.device_plugins_dir,
        "--listen",
        LISTEN,
    ]
    # Validated values (absolute paths of a safe charset, a DNS-1123 domain): nothing for systemd
    # to unquote or expand ('%', '$', quotes and spaces are refused by the configuration).
    return " ".join(arguments)


def unit(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> HostFile:
    layout = kubelet.layout
    resources = ", ".join(resource.resource for resource in plugin.resources)
    return HostFile(
        unit_path(kubelet, plugin),
        HEADER
        + "[Unit]\n"
        + f"Description=numa-kubelets: generic device plugin ({resources}) for kubelet {kubelet.node_name} "
        + f"on NUMA node {kubelet.numa_node}\n"
        + "Documentation=https://github.com/squat/generic-device-plugin\n"
        # Ordering only, not PartOf=: the plugin re-registers by itself when the kubelet restarts
        # (it watches its socket, which a starting kubelet deletes), and its own restart (a change
        # of its devices) must not restart the kubelet. Started first, it retries every 5 s.
        + f"After={layout.kubelet_unit}\n"
        + "\n"
        + "[Service]\n"
        + f"Slice={layout.slice}\n"
        + f"ExecStartPre=/bin/sh {resolver_path(kubelet, plugin)}\n"
        + f"ExecStart={exec_start(kubelet, plugin)}\n"
        + "Restart=always\n"
        + "RestartSec=5\n"
        + "\n"
        + "[Install]\n"
        + "WantedBy=multi-user.target\n",
    )


def plugin_files(kubelet: KubeletPlan, plugin: GenericPluginInstance) -> list[HostFile]:
    """One plugin's files, in install order: its resolver, then its unit."""
    return [resolver_script(kubelet, plugin), unit(kubelet, plugin)]
