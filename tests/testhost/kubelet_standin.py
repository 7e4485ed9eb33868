#!/usr/bin/python3
"""numa-kubelets test stand-in for the kubelet. This is NOT a kubelet.

No kubelet binary can be obtained where the tests run, so the test host
carries this script at /usr/bin/kubelet. It is started by the product's
`kubelet@numa<N>.service` units and is strict where a real kubelet 1.35 is
strict or where a mistake would only show on a real cluster:

* flags: only the flag-only ones, `--flag=value` form; removed flags, flags
  deprecated in favour of the config file, and unknown flags are refused;
* the KubeletConfiguration file: apiVersion/kind, known fields and their
  types (as the kubelet's strict decoder), systemd cgroup driver, a
  cgroupRoot the systemd driver can convert, a podLogsDir of its own, ...;
* its environment: running inside the `<cgroupRoot>.slice`, a private
  /var/lib/kubelet/device-plugins, a container runtime socket that answers.

When all of that holds it records what it saw as JSON in
`<root-dir>/standin-record.json`, serves healthz and the kubelet ports (so
two stand-ins on one port collide as real kubelets do), notifies systemd and
sleeps until SIGTERM (exit 0). Any problem: every problem on stderr, exit 1.

Pure validation functions are separate from the side effects (`main`) so
they can be unit tested on any machine; only the standard library and
PyYAML (python3-yaml in the guest) are used.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml

VERSION_LINE = "Kubernetes v1.35.0 (numa-kubelets test stand-in, not a kubelet)"
RECORD_NAME = "standin-record.json"
DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins"
DEFAULT_POD_LOGS_DIR = "/var/log/pods"
RUNTIME_SOCKET_WAIT_SECONDS = 30.0


class StandinError(Exception):
    """Refusal to start; the message lists every problem found."""

    def __init__(self, heading: str, problems: list[str]):
        self.problems = problems
        super().__init__(heading + "".join(f"\n  - {problem}" for problem in problems))


# --------------------------------------------------------------------------
# flags
# --------------------------------------------------------------------------

FLAG_ONLY = (
    "config",
    "config-dir",
    "kubeconfig",
    "bootstrap-kubeconfig",
    "root-dir",
    "cert-dir",
    "hostname-override",
    "node-labels",
    "node-ip",
    "v",
)
REQUIRED_FLAGS = ("config", "root-dir", "hostname-override")
PATH_FLAGS = ("config", "config-dir", "kubeconfig", "bootstrap-kubeconfig", "root-dir", "cert-dir")

REMOVED_FLAGS = {
    "api-servers": "removed in Kubernetes 1.8; use --kubeconfig",
    "cadvisor-port": "removed in Kubernetes 1.12",
    "allow-privileged": "removed in Kubernetes 1.15",
}

# Deprecated flags and the KubeletConfiguration field that replaces each.
CONFIG_FIELD_OF_FLAG = {
    "address": "address",
    "port": "port",
    "read-only-port": "readOnlyPort",
    "healthz-port": "healthzPort",
    "healthz-bind-address": "healthzBindAddress",
    "max-pods": "maxPods",
    "pods-per-core": "podsPerCore",
    "cgroup-root": "cgroupRoot",
    "cgroup-driver": "cgroupDriver",
    "cgroups-per-qos": "cgroupsPerQOS",
    "container-runtime-endpoint": "containerRuntimeEndpoint",
    "image-service-endpoint": "imageServiceEndpoint",
    "pod-logs-dir": "podLogsDir",
    "pod-manifest-path": "staticPodPath",
    "system-reserved": "systemReserved",
    "kube-reserved": "kubeReserved",
    "system-reserved-cgroup": "systemReservedCgroup",
    "kube-reserved-cgroup": "kubeReservedCgroup",
    "reserved-cpus": "reservedSystemCPUs",
    "enforce-node-allocatable": "enforceNodeAllocatable",
    "eviction-hard": "evictionHard",
    "eviction-soft": "evictionSoft",
    "fail-swap-on": "failSwapOn",
    "cluster-dns": "clusterDNS",
    "cluster-domain": "clusterDomain",
    "resolv-conf": "resolvConf",
    "cpu-manager-policy": "cpuManagerPolicy",
    "memory-manager-policy": "memoryManagerPolicy",
    "topology-manager-policy": "topologyManagerPolicy",
    "topology-manager-scope": "topologyManagerScope",
    "kubelet-cgroups": "kubeletCgroups",
    "system-cgroups": "systemCgroups",
    "feature-gates": "featureGates",
    "register-node": "registerNode",
    "register-with-taints": "registerWithTaints",
    "rotate-certificates": "rotateCertificates",
    "tls-cert-file": "tlsCertFile",
    "tls-private-key-file": "tlsPrivateKeyFile",
    "client-ca-file": "authentication.x509.clientCAFile",
    "anonymous-auth": "authentication.anonymous.enabled",
    "authentication-token-webhook": "authentication.webhook.enabled",
    "authorization-mode": "authorization.mode",
    "serialize-image-pulls": "serializeImagePulls",
    "volume-plugin-dir": "volumePluginDir",
    "node-status-update-frequency": "nodeStatusUpdateFrequency",
    "provider-id": "providerID",
    "max-open-files": "maxOpenFiles",
    "oom-score-adj": "oomScoreAdj",
    "container-log-max-size": "containerLogMaxSize",
    "container-log-max-files": "containerLogMaxFiles",
    "sync-frequency": "syncFrequency",
    "pod-max-pids": "podPidsLimit",
    "protect-kernel-defaults": "protectKernelDefaults",
}

USAGE = f"""{VERSION_LINE}

Usage: kubelet --config=FILE --root-dir=DIR --hostname-override=NAME [flags]

Accepted flags (--flag=value form only): {", ".join("--" + name for name in FLAG_ONLY)}
Everything else belongs in the KubeletConfiguration file given by --config.
"""


def parse_flags(argv: list[str]) -> dict[str, str]:
    """Command line (without the program name) to {flag name: value}."""
    flags: dict[str, str] = {}
    problems: list[str] = []
    for arg in argv:
        if not arg.startswith("--"):
            problems.append(f"unexpected argument {arg!r}: the kubelet takes no positional arguments")
            continue
        name, has_value, value = arg[2:].partition("=")
        if name in REMOVED_FLAGS:
            problems.append(f"--{name} was {REMOVED_FLAGS[name]}")
        elif name in CONFIG_FIELD_OF_FLAG:
            problems.append(
                f"--{name} is deprecated: set '{CONFIG_FIELD_OF_FLAG[name]}' in the "
                f"KubeletConfiguration file (--config) instead"
            )
        elif name not in FLAG_ONLY:
            problems.append(f"unknown flag: --{name}")
        elif not has_value:
            problems.append(f"--{name} needs a value, in --{name}=value form")
        elif name in flags:
            problems.append(f"--{name} given more than once")
        else:
            flags[name] = value
    for name in REQUIRED_FLAGS:
        if name not in flags and not any(p.startswith(f"--{name} ") for p in problems):
            problems.append(f"--{name} is required")
    problems += _flag_value_problems(flags)
    if problems:
        raise StandinError("kubelet stand-in: invalid command line:", problems)
    return flags


def _flag_value_problems(flags: dict[str, str]) -> list[str]:
    problems = []
    for name in PATH_FLAGS:
        if name in flags and not os.path.isabs(flags[name]):
            problems.append(f"--{name}={flags[name]!r} must be an absolute path")
    if "v" in flags and not flags["v"].isdigit():
        problems.append(f"--v={flags['v']!r} must be a non-negative integer")
    if "hostname-override" in flags and not is_dns1123_subdomain(flags["hostname-override"]):
        problems.append(
            f"--hostname-override={flags['hostname-override']!r} is not a valid node name "
            "(lowercase RFC 1123 subdomain)"
        )
    if "node-ip" in flags:
        problems += node_ip_problems(flags["node-ip"])
    if "node-labels" in flags:
        try:
            labels = parse_node_labels(flags["node-labels"])
        except ValueError as error:
            problems.append(str(error))
        else:
            problems += node_label_problems(labels)
    return problems


def node_ip_problems(value: str) -> list[str]:
    problems = []
    for part in value.split(","):
        try:
            ipaddress.ip_address(part)
        except ValueError:
            problems.append(f"--node-ip: {part!r} is not an IP address")
    return problems


def parse_node_labels(value: str) -> dict[str, str]:
    """`k=v,k2=v2` as the kubelet's --node-labels takes it."""
    labels: dict[str, str] = {}
    for pair in value.split(","):
        key, has_value, label_value = pair.partition("=")
        if not has_value:
            raise ValueError(f"--node-labels: {pair!r} is not in key=value form")
        labels[key] = label_value
    return labels


_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)"
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"

# Labels in the kubernetes.io / k8s.io namespaces that a kubelet may set on its
# own Node (NodeRestriction); any other there makes the real kubelet exit.
ALLOWED_KUBERNETES_LABELS = {
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
}
ALLOWED_KUBERNETES_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and re.fullmatch(_DNS1123_SUBDOMAIN, value) is not None


def node_label_problems(labels: dict[str, str]) -> list[str]:
    problems = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if prefix and not is_dns1123_subdomain(prefix):
            problems.append(f"--node-labels: label key {key!r} has an invalid prefix")
        if len(name) > 63 or not re.fullmatch(_NAME, name):
            problems.append(f"--node-labels: label key {key!r} has an invalid name")
        if len(value) > 63 or (value and not re.fullmatch(_NAME, value)):
            problems.append(f"--node-labels: label {key!r} has an invalid value {value!r}")
        if _in_kubernetes_namespace(prefix) and not _allowed_kubernetes_label(key, prefix):
            problems.append(
                f"--node-labels: {key!r} is in the kubernetes.io/k8s.io namespace; a kubelet may "
                f"only set {', '.join(sorted(ALLOWED_KUBERNETES_LABELS))} or labels under "
                f"{' or '.join(ALLOWED_KUBERNETES_LABEL_NAMESPACES)}"
            )
    return problems


def _in_kubernetes_namespace(prefix: str) -> bool:
    return any(prefix == ns or prefix.endswith("." + ns) for ns in ("kubernetes.io", "k8s.io"))


def _allowed_kubernetes_label(key: str, prefix: str) -> bool:
    return key in ALLOWED_KUBERNETES_LABELS or any(
        prefix == ns or prefix.endswith("." + ns) for ns in ALLOWED_KUBERNETES_LABEL_NAMESPACES
    )


# --------------------------------------------------------------------------
# KubeletConfiguration
# --------------------------------------------------------------------------

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"

# Field types of kubelet.config.k8s.io/v1beta1 KubeletConfiguration (Kubernetes
# 1.35, staging/src/k8s.io/kubelet/config/v1beta1/types.go). The kubelet
# decodes the file strictly: an unknown field, or a number where a string
# belongs, stops it.
BOOL, INT, FLOAT, STR, DURATION, STR_LIST, INT_LIST, STR_MAP, BOOL_MAP, OBJECT, OBJECT_LIST = (
    "bool",
    "int",
    "float",
    "string",
    "duration",
    "[]string",
    "[]int",
    "map[string]string",
    "map[string]bool",
    "object",
    "[]object",
)
FIELD_TYPES = {
    "enableServer": BOOL,
    "staticPodPath": STR,
    "podLogsDir": STR,
    "syncFrequency": DURATION,
    "fileCheckFrequency": DURATION,
    "httpCheckFrequency": DURATION,
    "staticPodURL": STR,
    "staticPodURLHeader": OBJECT,
    "address": STR,
    "port": INT,
    "readOnlyPort": INT,
    "tlsCertFile": STR,
    "tlsPrivateKeyFile": STR,
    "tlsCipherSuites": STR_LIST,
    "tlsCurvePreferences": INT_LIST,
    "tlsMinVersion": STR,
    "rotateCertificates": BOOL,
    "serverTLSBootstrap": BOOL,
    "authentication": OBJECT,
    "authorization": OBJECT,
    "registryPullQPS": INT,
    "registryBurst": INT,
    "imagePullCredentialsVerificationPolicy": STR,
    "preloadedImagesVerificationAllowlist": STR_LIST,
    "eventRecordQPS": INT,
    "eventBurst": INT,
    "enableDebuggingHandlers": BOOL,
    "enableContentionProfiling": BOOL,
    "healthzPort": INT,
    "healthzBindAddress": STR,
    "oomScoreAdj": INT,
    "clusterDomain": STR,
    "clusterDNS": STR_LIST,
    "streamingConnectionIdleTimeout": DURATION,
    "nodeStatusUpdateFrequency": DURATION,
    "nodeStatusReportFrequency": DURATION,
    "nodeLeaseDurationSeconds": INT,
    "imageMinimumGCAge": DURATION,
    "imageMaximumGCAge": DURATION,
    "imageGCHighThresholdPercent": INT,
    "imageGCLowThresholdPercent": INT,
    "volumeStatsAggPeriod": DURATION,
    "kubeletCgroups": STR,
    "systemCgroups": STR,
    "cgroupRoot": STR,
    "cgroupsPerQOS": BOOL,
    "cgroupDriver": STR,
    "cpuManagerPolicy": STR,
    "singleProcessOOMKill": BOOL,
    "cpuManagerPolicyOptions": STR_MAP,
    "cpuManagerReconcilePeriod": DURATION,
    "memoryManagerPolicy": STR,
    "topologyManagerPolicy": STR,
    "topologyManagerScope": STR,
    "topologyManagerPolicyOptions": STR_MAP,
    "qosReserved": STR_MAP,
    "runtimeRequestTimeout": DURATION,
    "hairpinMode": STR,
    "maxPods": INT,
    "podCIDR": STR,
    "podPidsLimit": INT,
    "resolvConf": STR,
    "runOnce": BOOL,
    "cpuCFSQuota": BOOL,
    "cpuCFSQuotaPeriod": DURATION,
    "nodeStatusMaxImages": INT,
    "maxOpenFiles": INT,
    "contentType": STR,
    "kubeAPIQPS": INT,
    "kubeAPIBurst": INT,
    "serializeImagePulls": BOOL,
    "maxParallelImagePulls": INT,
    "evictionHard": STR_MAP,
    "evictionSoft": STR_MAP,
    "evictionSoftGracePeriod": STR_MAP,
    "evictionPressureTransitionPeriod": DURATION,
    "evictionMaxPodGracePeriod": INT,
    "evictionMinimumReclaim": STR_MAP,
    "mergeDefaultEvictionSettings": BOOL,
    "podsPerCore": INT,
    "enableControllerAttachDetach": BOOL,
    "protectKernelDefaults": BOOL,
    "makeIPTablesUtilChains": BOOL,
    "iptablesMasqueradeBit": INT,
    "iptablesDropBit": INT,
    "featureGates": BOOL_MAP,
    "failSwapOn": BOOL,
    "memorySwap": OBJECT,
    "containerLogMaxSize": STR,
    "containerLogMaxFiles": INT,
    "containerLogMaxWorkers": INT,
    "containerLogMonitorInterval": DURATION,
    "configMapAndSecretChangeDetectionStrategy": STR,
    "systemReserved": STR_MAP,
    "kubeReserved": STR_MAP,
    "reservedSystemCPUs": STR,
    "showHiddenMetricsForVersion": STR,
    "systemReservedCgroup": STR,
    "kubeReservedCgroup": STR,
    "enforceNodeAllocatable": STR_LIST,
    "allowedUnsafeSysctls": STR_LIST,
    "defaultPodSysctls": STR_MAP,
    "volumePluginDir": STR,
    "providerID": STR,
    "kernelMemcgNotification": BOOL,
    "logging": OBJECT,
    "enableSystemLogHandler": BOOL,
    "enableSystemLogQuery": BOOL,
    "shutdownGracePeriod": DURATION,
    "shutdownGracePeriodCriticalPods": DURATION,
    "shutdownGracePeriodByPodPriority": OBJECT_LIST,
    "crashLoopBackOff": OBJECT,
    "reservedMemory": OBJECT_LIST,
    "enableProfilingHandler": BOOL,
    "enableDebugFlagsHandler": BOOL,
    "seccompDefault": BOOL,
    "memoryThrottlingFactor": FLOAT,
    "memoryReservationPolicy": STR,
    "registerWithTaints": OBJECT_LIST,
    "registerNode": BOOL,
    "tracing": OBJECT,
    "localStorageCapacityIsolation": BOOL,
    "containerRuntimeEndpoint": STR,
    "imageServiceEndpoint": STR,
    "failCgroupV1": BOOL,
    "userNamespaces": OBJECT,
}

ENUMS = {
    "cgroupDriver": ("systemd", "cgroupfs"),
    "cpuManagerPolicy": ("none", "static"),
    "memoryManagerPolicy": ("None", "Static"),
    "topologyManagerPolicy": ("none", "best-effort", "restricted", "single-numa-node"),
    "topologyManagerScope": ("container", "pod"),
    "hairpinMode": ("promiscuous-bridge", "hairpin-veth", "none"),
}
RESERVABLE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")
EVICTION_SIGNALS = (
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
)
NODE_ALLOCATABLE_ENFORCEMENTS = (
    "none",
    "pods",
    "system-reserved",
    "system-reserved-compressible",
    "kube-reserved",
    "kube-reserved-compressible",
)

_QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?")
_PERCENTAGE = re.compile(r"\d+(\.\d+)?%")
_DURATION = re.compile(r"0|[+-]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+")
_CPULIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
_CGROUP_ROOT = re.compile(r"/([A-Za-z0-9]+)")


def load_config(text: str) -> dict[str, Any]:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise StandinError("kubelet stand-in: config file is not valid YAML:", [str(error)]) from None
    if not isinstance(config, dict):
        raise StandinError("kubelet stand-in: invalid config file:", ["the document is not a mapping"])
    return config


def merge_dropin(config: dict[str, Any], dropin: dict[str, Any]) -> dict[str, Any]:
    """The kubelet's --config-dir merge: a drop-in's fields override, nested maps merge."""
    merged = dict(config)
    for field, value in dropin.items():
        if isinstance(value, dict) and isinstance(merged.get(field), dict):
            merged[field] = merge_dropin(merged[field], value)
        else:
            merged[field] = value
    return merged


def read_dropins(directory: str) -> list[tuple[str, dict[str, Any]]]:
    """The *.conf files of --config-dir in lexical order, each a full KubeletConfiguration document."""
    try:
        names = sorted(name for name in os.listdir(directory) if name.endswith(".conf"))
    except OSError as error:
        raise StandinError("kubelet stand-in: cannot read --config-dir:", [f"{directory}: {error.strerror}"]) from None
    dropins = []
    for name in names:
        path = os.path.join(directory, name)
        dropin = load_config(read_text(path))
        header = [
            f"{path}: {field} must be {expected!r}, not {dropin.get(field)!r}"
            for field, expected in (("apiVersion", API_VERSION), ("kind", KIND))
            if dropin.get(field) != expected
        ]
        if header:
            raise StandinError("kubelet stand-in: invalid drop-in:", header)
        dropins.append((path, dropin))
    return dropins


def validate_config(config: dict[str, Any]) -> list[str]:
    """Every problem of a parsed KubeletConfiguration, for the kubelet units of this product."""
    problems: list[str] = []
    if config.get("apiVersion") != API_VERSION:
        problems.append(f"apiVersion must be {API_VERSION!r}, not {config.get('apiVersion')!r}")
    if config.get("kind") != KIND:
        problems.append(f"kind must be {KIND!r}, not {config.get('kind')!r}")
    for field, value in config.items():
        if field in ("apiVersion", "kind"):
            continue
        if field not in FIELD_TYPES:
            problems.append(f'unknown field "{field}"')
        elif not _has_type(value, FIELD_TYPES[field]):
            problems.append(f"{field}: {value!r} is not a {FIELD_TYPES[field]}")
    # Value checks only on well-typed fields, so each mistake is reported once.
    typed = {
        field: value for field, value in config.items() if field in FIELD_TYPES and _has_type(value, FIELD_TYPES[field])
    }
    for check in _VALUE_CHECKS:
        problems += check(typed)
    return problems


def _has_type(value: Any, kind: str) -> bool:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if kind == BOOL:
        return isinstance(value, bool)
    if kind == INT:
        return is_int
    if kind == FLOAT:
        return is_int or isinstance(value, float)
    if kind == STR:
        return isinstance(value, str)
    if kind == DURATION:
        return isinstance(value, str) and _DURATION.fullmatch(value) is not None
    if kind == STR_LIST:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if kind == INT_LIST:
        return isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value)
    if kind == STR_MAP:
        # A YAML number here (cpu: 2) is a decode error in the real kubelet.
        return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())
    if kind == BOOL_MAP:
        return isinstance(value, dict) and all(isinstance(item, bool) for item in value.values())
    if kind == OBJECT:
        return isinstance(value, dict)
    if kind == OBJECT_LIST:
        return isinstance(value, list) and all(isinstance(item, dict) for item in value)
    raise AssertionError(kind)


def _check_enums(config: dict[str, Any]) -> list[str]:
    return [
        f"{field}: {config[field]!r} is not one of {', '.join(allowed)}"
        for field, allowed in ENUMS.items()
        if field in config and config[field] not in allowed
    ]


def _check_cgroups(config: dict[str, Any]) -> list[str]:
    problems = []
    if config.get("cgroupDriver") != "systemd":
        problems.append(
            "cgroupDriver must be 'systemd' (the kubelet and containerd must both use the "
            f"systemd driver on this host), not {config.get('cgroupDriver', '<unset: cgroupfs>')!r}"
        )
    problems += cgroup_root_problems(config.get("cgroupRoot"))
    if config.get("systemCgroups") and not config.get("cgroupRoot"):
        problems.append("systemCgroups needs cgroupRoot")
    return problems


def cgroup_root_problems(cgroup_root: str | None) -> list[str]:
    """cgroupRoot as the systemd driver converts it: "/numa0" -> numa0.slice."""
    if not cgroup_root:
        return ["cgroupRoot is required: the slice the pods of this kubelet go to, e.g. /numa0"]
    if cgroup_root.endswith(".slice"):
        return [
            f"cgroupRoot {cgroup_root!r}: the systemd driver appends .slice itself "
            f"({cgroup_root!r} would become {cgroup_root.lstrip('/')}.slice); "
            f"use {cgroup_root[: -len('.slice')]!r}"
        ]
    if "-" in cgroup_root or "_" in cgroup_root:
        return [
            f"cgroupRoot {cgroup_root!r}: '-' nests slices and '_' is mangled by the systemd "
            "driver; use letters and digits only, e.g. /numa0"
        ]
    if not _CGROUP_ROOT.fullmatch(cgroup_root):
        return [f"cgroupRoot {cgroup_root!r} must be '/<name>' with letters and digits, e.g. /numa0"]
    return []


def slice_of_cgroup_root(cgroup_root: str) -> str:
    return cgroup_root.lstrip("/") + ".slice"


def _check_endpoints(config: dict[str, Any]) -> list[str]:
    problems = []
    endpoint = config.get("containerRuntimeEndpoint")
    if not endpoint:
        problems.append("containerRuntimeEndpoint is required, e.g. unix:///run/containerd-numa0/containerd.sock")
    for field in ("containerRuntimeEndpoint", "imageServiceEndpoint"):
        value = config.get(field)
        if value and not (value.startswith("unix:///") and len(value) > len("unix:///")):
            problems.append(f"{field} {value!r} must be unix:///<absolute socket path>")
    return problems


def socket_path_of(endpoint: str) -> str:
    return endpoint[len("unix://") :]


def _check_paths(config: dict[str, Any]) -> list[str]:
    problems = []
    pod_logs_dir = config.get("podLogsDir")
    if not pod_logs_dir:
        problems.append(
            "podLogsDir is required: each kubelet needs its own (container GC removes the "
            "log directories of pods it does not know)"
        )
    elif os.path.normpath(pod_logs_dir) == DEFAULT_POD_LOGS_DIR:
        problems.append(f"podLogsDir must not be the shared default {DEFAULT_POD_LOGS_DIR}")
    for field in ("podLogsDir", "staticPodPath", "volumePluginDir", "tlsCertFile", "tlsPrivateKeyFile"):
        value = config.get(field)
        if value and not os.path.isabs(value):
            problems.append(f"{field} {value!r} must be an absolute path")
    return problems


def _check_ports(config: dict[str, Any]) -> list[str]:
    problems = []
    for field, lowest in (("port", 1), ("healthzPort", 0), ("readOnlyPort", 0)):
        if field in config and not lowest <= config[field] <= 65535:
            problems.append(f"{field} {config[field]} must be between {lowest} and 65535")
    for field in ("address", "healthzBindAddress"):
        if field in config:
            try:
                ipaddress.ip_address(config[field])
            except ValueError:
                problems.append(f"{field} {config[field]!r} is not an IP address")
    if config.get("maxPods", 0) < 0:
        problems.append(f"maxPods {config['maxPods']} must not be negative")
    return problems


def _check_reservations(config: dict[str, Any]) -> list[str]:
    problems = []
    for field in ("systemReserved", "kubeReserved"):
        for resource, quantity in config.get(field, {}).items():
            if resource not in RESERVABLE_RESOURCES:
                problems.append(f"{field}: unsupported resource {resource!r} ({', '.join(RESERVABLE_RESOURCES)})")
            if not _QUANTITY.fullmatch(quantity):
                problems.append(f"{field}.{resource}: {quantity!r} is not a quantity")
    for field in ("evictionHard", "evictionSoft", "evictionMinimumReclaim"):
        for signal_name, threshold in config.get(field, {}).items():
            if signal_name not in EVICTION_SIGNALS:
                problems.append(f"{field}: unknown eviction signal {signal_name!r}")
            if not (_QUANTITY.fullmatch(threshold) or _PERCENTAGE.fullmatch(threshold)):
                problems.append(f"{field}.{signal_name}: {threshold!r} is not a quantity or percentage")
    reserved_cpus = config.get("reservedSystemCPUs")
    if reserved_cpus is not None:
        if not _CPULIST.fullmatch(reserved_cpus):
            problems.append(f"reservedSystemCPUs {reserved_cpus!r} is not a cpulist")
        if config.get("systemReservedCgroup") or config.get("kubeReservedCgroup"):
            problems.append("reservedSystemCPUs cannot be combined with systemReservedCgroup or kubeReservedCgroup")
    return problems


def _check_node_allocatable(config: dict[str, Any]) -> list[str]:
    problems = []
    enforcements = config.get("enforceNodeAllocatable", ["pods"])
    for item in enforcements:
        if item not in NODE_ALLOCATABLE_ENFORCEMENTS:
            problems.append(f"enforceNodeAllocatable: unknown option {item!r}")
    if "none" in enforcements and len(enforcements) > 1:
        problems.append("enforceNodeAllocatable: 'none' cannot be combined with other options")
    for option, cgroup_field in (("system-reserved", "systemReservedCgroup"), ("kube-reserved", "kubeReservedCgroup")):
        wanted = option in enforcements or f"{option}-compressible" in enforcements
        if wanted and not config.get(cgroup_field):
            problems.append(f"enforceNodeAllocatable has {option}: {cgroup_field} must be set")
        if option in enforcements and f"{option}-compressible" in enforcements:
            problems.append(f"enforceNodeAllocatable: {option} and {option}-compressible are exclusive")
    enforcing = [item for item in enforcements if item != "none"]
    if enforcing and config.get("cgroupsPerQOS") is False:
        problems.append("enforceNodeAllocatable is only supported with cgroupsPerQOS: true")
    return problems


_VALUE_CHECKS: tuple[Callable[[dict[str, Any]], list[str]], ...] = (
    _check_enums,
    _check_cgroups,
    _check_endpoints,
    _check_paths,
    _check_ports,
    _check_reservations,
    _check_node_allocatable,
)


# --------------------------------------------------------------------------
# resource managers: CPU, memory and topology manager settings, state files
# --------------------------------------------------------------------------

# Policy options of kubelet 1.35 and their stage: alpha ones need the alpha feature gate.
CPU_MANAGER_OPTIONS = {
    "full-pcpus-only": "GA",
    "distribute-cpus-across-numa": "beta",
    "align-by-socket": "alpha",
    "distribute-cpus-across-cores": "alpha",
    "strict-cpu-reservation": "GA",
    "prefer-align-cpus-by-uncorecache": "beta",
}
TOPOLOGY_MANAGER_OPTIONS = {"prefer-closest-numa-nodes": "GA", "max-allowable-numa-nodes": "GA"}
TOPOLOGY_MANAGER_MAX_NUMA_NODES = 8
CPU_STATE, MEMORY_STATE = "cpu_manager_state", "memory_manager_state"
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def parse_cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for item in filter(None, text.strip().split(",")):
        first, _, last = item.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def quantity_bytes(text: str) -> int:
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?", text)
    if match is None:
        raise ValueError(f"{text!r} is not a whole-byte memory quantity")
    suffix = match.group(2) or ""
    return int(match.group(1)) * (_BINARY.get(suffix) or _DECIMAL.get(suffix) or 1)


def _option_problems(config: dict[str, Any], field: str, known: dict[str, str], alpha_gate: str) -> list[str]:
    problems = []
    gates = config.get("featureGates", {})
    for option in config.get(field, {}):
        if option not in known:
            problems.append(f"{field}: unknown option {option!r}")
        elif known[option] == "alpha" and not gates.get(alpha_gate, False):
            problems.append(f"{field}: {option} is alpha: it needs featureGates.{alpha_gate}: true")
    return problems


def manager_problems(config: dict[str, Any], online_cpus: set[int], numa_nodes: list[int]) -> list[str]:
    """What the CPU, memory and topology managers refuse at start, given the machine's CPUs and nodes."""
    problems = _option_problems(config, "cpuManagerPolicyOptions", CPU_MANAGER_OPTIONS, "CPUManagerPolicyAlphaOptions")
    problems += _option_problems(
        config, "topologyManagerPolicyOptions", TOPOLOGY_MANAGER_OPTIONS, "TopologyManagerPolicyAlphaOptions"
    )
    cpu_policy = config.get("cpuManagerPolicy", "none")
    if config.get("cpuManagerPolicyOptions") and cpu_policy != "static":
        problems.append("cpuManagerPolicyOptions need cpuManagerPolicy: static")
    reserved_text = config.get("reservedSystemCPUs")
    if reserved_text is not None and _CPULIST.fullmatch(reserved_text):
        stray = parse_cpulist(reserved_text) - online_cpus
        if stray:
            problems.append(f"reservedSystemCPUs {reserved_text}: CPUs {sorted(stray)} are not online")
    if cpu_policy == "static":
        reserved_cpu = config.get("systemReserved", {}).get("cpu", "0")
        if not reserved_text and reserved_cpu in ("0", "0m"):
            problems.append("the static CPU manager needs reserved CPUs (reservedSystemCPUs or systemReserved.cpu)")
    topology_policy = config.get("topologyManagerPolicy", "none")
    if (
        topology_policy != "none"
        and len(numa_nodes) > TOPOLOGY_MANAGER_MAX_NUMA_NODES
        and "max-allowable-numa-nodes" not in config.get("topologyManagerPolicyOptions", {})
    ):
        problems.append(f"topology manager: {len(numa_nodes)} NUMA nodes need max-allowable-numa-nodes")
    if config.get("memoryManagerPolicy", "None") == "Static":
        problems += static_memory_problems(config, numa_nodes)
    elif config.get("reservedMemory"):
        problems.append("reservedMemory is only used with memoryManagerPolicy: Static")
    return problems


def static_memory_problems(config: dict[str, Any], numa_nodes: list[int]) -> list[str]:
    """The kubelet's sum rule: reservedMemory equals systemReserved + kubeReserved + evictionHard, exactly."""
    entries = config.get("reservedMemory")
    if not entries:
        return ["memoryManagerPolicy Static needs reservedMemory"]
    problems = []
    try:
        total = 0
        for entry in entries:
            node, limits = entry.get("numaNode"), entry.get("limits", {})
            if node not in numa_nodes:
                problems.append(f"reservedMemory: NUMA node {node} does not exist (nodes {numa_nodes})")
            size = quantity_bytes(limits.get("memory", "0"))
            if size == 0:
                problems.append(f"reservedMemory: NUMA node {node} reserves no memory")
            total += size
        required = expected_reserved_memory(config)
    except ValueError as error:
        return [*problems, f"reservedMemory: {error}"]
    if total != required:
        problems.append(
            f"the total amount {total} of type memory is not equal to the value {required} determined by "
            "Node Allocatable feature (systemReserved + kubeReserved + evictionHard)"
        )
    return problems


def expected_reserved_memory(config: dict[str, Any]) -> int:
    eviction = config.get("evictionHard")
    if eviction is None:
        eviction_memory = "100Mi"
    else:
        eviction_memory = eviction.get(
            "memory.available", "100Mi" if config.get("mergeDefaultEvictionSettings") else "0"
        )
    return (
        quantity_bytes(config.get("systemReserved", {}).get("memory", "0"))
        + quantity_bytes(config.get("kubeReserved", {}).get("memory", "0"))
        + quantity_bytes(eviction_memory)
    )


def reserved_memory_by_node(config: dict[str, Any]) -> dict[str, int]:
    return {
        str(entry["numaNode"]): quantity_bytes(entry["limits"]["memory"]) for entry in config.get("reservedMemory", [])
    }


def state_file_problems(config: dict[str, Any], cpu_state: Any, memory_state: Any) -> list[str]:
    """The kubelet refuses a state file written for another policy or reservation."""
    problems = []
    cpu_policy = config.get("cpuManagerPolicy", "none")
    if cpu_state is not None:
        if cpu_state.get("policyName") != cpu_policy:
            problems.append(
                f"could not restore state from checkpoint: configured policy {cpu_policy!r} differs from state "
                f"checkpoint policy {cpu_state.get('policyName')!r}; remove {CPU_STATE} to start"
            )
        elif cpu_policy == "static" and cpu_state.get("reservedSystemCPUs") != config.get("reservedSystemCPUs"):
            problems.append(
                f"static policy: reserved CPUs {config.get('reservedSystemCPUs')} differ from the checkpoint's "
                f"{cpu_state.get('reservedSystemCPUs')}; remove {CPU_STATE} to start"
            )
    memory_policy = config.get("memoryManagerPolicy", "None")
    if memory_state is not None:
        if memory_state.get("policyName") != memory_policy:
            problems.append(
                f"could not restore state from checkpoint: configured policy {memory_policy!r} differs from state "
                f"checkpoint policy {memory_state.get('policyName')!r}; remove {MEMORY_STATE} to start"
            )
        elif memory_policy == "Static" and memory_state.get("reserved") != reserved_memory_by_node(config):
            problems.append(
                f"[memorymanager] the expected machine state is different from the real one; remove {MEMORY_STATE}"
            )
    return problems


def new_state_files(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the stand-in checkpoints: the policy and the reservation it was started with (not the real format)."""
    cpu: dict[str, Any] = {"policyName": config.get("cpuManagerPolicy", "none")}
    if cpu["policyName"] == "static":
        cpu["reservedSystemCPUs"] = config.get("reservedSystemCPUs")
    memory: dict[str, Any] = {"policyName": config.get("memoryManagerPolicy", "None")}
    if memory["policyName"] == "Static":
        memory["reserved"] = reserved_memory_by_node(config)
    return {CPU_STATE: cpu, MEMORY_STATE: memory}


# --------------------------------------------------------------------------
# the environment the unit gives the process (pure parts)
# --------------------------------------------------------------------------


def own_cgroup(proc_self_cgroup: str) -> str | None:
    """The unified (cgroup v2) path from /proc/self/cgroup, None on cgroup v1."""
    lines = [line for line in proc_self_cgroup.splitlines() if line.strip()]
    if len(lines) == 1 and lines[0].startswith("0::"):
        return lines[0][3:]
    return None


def cgroup_placement_problems(proc_self_cgroup: str, cgroup_root: str) -> list[str]:
    path = own_cgroup(proc_self_cgroup)
    if path is None:
        return ["not on a unified cgroup v2 hierarchy (the kubelet refuses cgroup v1 by default)"]
    expected = slice_of_cgroup_root(cgroup_root)
    if expected not in path.split("/"):
        return [
            f"running in cgroup {path}, not inside {expected}: the kubelet unit needs "
            f"Slice={expected} so the kubelet and its pods share the NUMA node's slice"
        ]
    return []


def parse_mountinfo(text: str) -> list[dict[str, str]]:
    """/proc/<pid>/mountinfo lines as dicts (mount_id, device, root, mount_point, fstype, source)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 10:
            continue
        separator = fields.index("-")
        mounts.append(
            {
                "mount_id": fields[0],
                "device": fields[2],
                "root": _unescape_mountinfo(fields[3]),
                "mount_point": _unescape_mountinfo(fields[4]),
                "propagation": " ".join(fields[6:separator]),
                "fstype": fields[separator + 1],
                "source": fields[separator + 2],
            }
        )
    return mounts


def _unescape_mountinfo(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def mount_at(mounts: list[dict[str, str]], path: str) -> dict[str, str] | None:
    """The mount visible at `path` (the last one stacked there), if `path` is a mount point."""
    found = [mount for mount in mounts if mount["mount_point"] == path]
    return found[-1] if found else None


def device_plugins_problems(
    own_mountinfo: str, host_mountinfo: str, own_mount_ns: str, host_mount_ns: str
) -> list[str]:
    """The kubelet deletes foreign sockets in DEVICE_PLUGINS_DIR: each needs its own view.

    "Own view" means: a mount at that path inside a mount namespace of the
    kubelet's own (systemd BindPaths=/TemporaryFileSystem=), not a directory
    or mount that the host, and with it every other kubelet, sees too. The
    propagation flag is not the point: systemd marks a unit's mounts shared
    within the unit's own namespace.
    """
    fix = (
        f"give each kubelet a private {DEVICE_PLUGINS_DIR} "
        f"(e.g. BindPaths=/var/lib/kubelet-numa<N>/device-plugins:{DEVICE_PLUGINS_DIR} in its unit)"
    )
    own = mount_at(parse_mountinfo(own_mountinfo), DEVICE_PLUGINS_DIR)
    if own is None:
        return [f"{DEVICE_PLUGINS_DIR} is not a mount point for this process: {fix}"]
    if own_mount_ns == host_mount_ns:
        return [f"{DEVICE_PLUGINS_DIR} is mounted in the host's mount namespace, shared by every kubelet: {fix}"]
    host = mount_at(parse_mountinfo(host_mountinfo), DEVICE_PLUGINS_DIR)
    if host is not None and (host["device"], host["root"]) == (own["device"], own["root"]):
        return [f"{DEVICE_PLUGINS_DIR} is the same directory the host sees ({own['root']}): {fix}"]
    return []


def status_field(proc_self_status: str, name: str) -> str | None:
    for line in proc_self_status.splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    return None


def listen_addresses(config: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """Which servers a kubelet with this configuration opens, with the v1beta1 defaults."""
    address = config.get("address", "0.0.0.0")
    servers = {}
    if config.get("enableServer", True):
        servers["server"] = (address, config.get("port", 10250))
    if config.get("readOnlyPort", 0):
        servers["read-only"] = (address, config["readOnlyPort"])
    if config.get("healthzPort", 10248):
        servers["healthz"] = (config.get("healthzBindAddress", "127.0.0.1"), config.get("healthzPort", 10248))
    return servers


# --------------------------------------------------------------------------
# side effects
# --------------------------------------------------------------------------


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def wait_for_runtime(socket_path: str, timeout: float) -> str | None:
    """Wait until the runtime's socket accepts connections; None when it does, else why not."""
    deadline = time.monotonic() + timeout
    reason = "does not exist"
    while True:
        if os.path.exists(socket_path):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(socket_path)
                return None
            except OSError as error:
                reason = f"exists but does not accept connections ({error.strerror})"
            finally:
                probe.close()
        if time.monotonic() >= deadline:
            return f"container runtime socket {socket_path} {reason} after {timeout:.0f} s"
        time.sleep(0.5)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"ok" if self.path == "/healthz" else b"numa-kubelets kubelet stand-in\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass  # probes must not flood the journal


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def serve(servers: dict[str, tuple[str, int]]) -> list[ThreadingHTTPServer]:
    """Bind every server (all or nothing) and serve them in threads."""
    started = []
    try:
        for name, (address, port) in servers.items():
            server_class = _IPv6Server if ":" in address else ThreadingHTTPServer
            try:
                server = server_class((address, port), _Handler)
            except OSError as error:
                raise StandinError(
                    "kubelet stand-in: cannot listen:",
                    [f"{name} on {address}:{port}: {error.strerror}"],
                ) from None
            started.append(server)
            threading.Thread(target=server.serve_forever, daemon=True).start()
    except StandinError:
        for server in started:
            server.shutdown()
            server.server_close()
        raise
    return started


def write_json_atomically(path: str, document: dict[str, Any]) -> None:
    temporary = f"{path}.tmp.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def notify_systemd(message: str) -> None:
    """sd_notify(3): the real kubelet reports READY=1 too, so Type=notify units work."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.connect(address)
        notify.sendall(message.encode())


def check_environment(config: dict[str, Any]) -> dict[str, Any]:
    """Cgroup, device-plugins view and runtime socket; returns what was observed."""
    proc_cgroup = read_text("/proc/self/cgroup")
    own_mountinfo = read_text("/proc/self/mountinfo")
    own_ns = os.readlink("/proc/self/ns/mnt")
    host_ns = os.readlink("/proc/1/ns/mnt")
    host_mountinfo = read_text("/proc/1/mountinfo")
    problems = cgroup_placement_problems(proc_cgroup, config["cgroupRoot"])
    problems += device_plugins_problems(own_mountinfo, host_mountinfo, own_ns, host_ns)
    if problems:
        raise StandinError("kubelet stand-in: refusing to start:", problems)
    runtime_socket = socket_path_of(config["containerRuntimeEndpoint"])
    runtime_problem = wait_for_runtime(runtime_socket, RUNTIME_SOCKET_WAIT_SECONDS)
    if runtime_problem:
        raise StandinError("kubelet stand-in: refusing to start:", [runtime_problem])
    device_plugins = mount_at(parse_mountinfo(own_mountinfo), DEVICE_PLUGINS_DIR)
    return {
        "cgroup": own_cgroup(proc_cgroup),
        "mount_namespace": own_ns,
        "device_plugins_mount": device_plugins,
        "runtime_socket": runtime_socket,
    }


def read_json_or_none(path: str) -> Any:
    try:
        return json.loads(read_text(path))
    except FileNotFoundError:
        return None


def check_resource_managers(config: dict[str, Any], root_dir: str) -> dict[str, Any]:
    """Manager settings against this machine, state files against the settings; then checkpoint."""
    online = parse_cpulist(read_text("/sys/devices/system/cpu/online"))
    nodes = sorted(int(name[4:]) for name in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", name))
    states = {name: read_json_or_none(os.path.join(root_dir, name)) for name in (CPU_STATE, MEMORY_STATE)}
    problems = manager_problems(config, online, nodes)
    problems += state_file_problems(config, states[CPU_STATE], states[MEMORY_STATE])
    if problems:
        raise StandinError("kubelet stand-in: refusing to start:", problems)
    for name, document in new_state_files(config).items():
        write_json_atomically(os.path.join(root_dir, name), document)
    return states


def _exit_cleanly(signal_number: int, frame: Any) -> None:
    raise SystemExit(0)


def run(argv: list[str]) -> int:
    if any(arg in ("--version", "--version=true", "--version=raw") for arg in argv):
        print(VERSION_LINE)
        return 0
    if any(arg in ("-h", "--help") for arg in argv):
        print(USAGE)
        return 0
    started_at = time.time()
    # Stopping is success, at any point (a kubelet stopped by systemd exits 0).
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, _exit_cleanly)
    flags = parse_flags(argv)
    try:
        config = load_config(read_text(flags["config"]))
    except OSError as error:
        problem = f"{flags['config']}: {error.strerror}"
        raise StandinError("kubelet stand-in: cannot read --config:", [problem]) from None
    config_files = [flags["config"]]
    for path, dropin in read_dropins(flags["config-dir"]) if "config-dir" in flags else []:
        config = merge_dropin(config, dropin)
        config_files.append(path)
    problems = validate_config(config)
    if "bootstrap-kubeconfig" in flags and not os.path.isfile(flags["bootstrap-kubeconfig"]):
        problems.append(f"--bootstrap-kubeconfig {flags['bootstrap-kubeconfig']} does not exist")
    if problems:
        raise StandinError(f"kubelet stand-in: invalid configuration in {flags['config']}:", problems)

    observed = check_environment(config)
    root_dir = flags["root-dir"]
    os.makedirs(root_dir, exist_ok=True)
    states_at_start = check_resource_managers(config, root_dir)
    os.makedirs(flags.get("cert-dir", os.path.join(root_dir, "pki")), exist_ok=True)
    servers = listen_addresses(config)
    serve(servers)
    listening = [f"{name} {address}:{port}" for name, (address, port) in servers.items()]
    status = read_text("/proc/self/status")
    record = {
        "standin": VERSION_LINE,
        "argv": [sys.argv[0], *argv],
        "flags": flags,
        "config": config,
        "config_files": config_files,
        "pid": os.getpid(),
        "started_at": started_at,
        "started_at_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
        "cpus_allowed_list": status_field(status, "Cpus_allowed_list"),
        "mems_allowed_list": status_field(status, "Mems_allowed_list"),
        "listening": listening,
        "state_files_at_start": states_at_start,
        **observed,
    }
    write_json_atomically(os.path.join(root_dir, RECORD_NAME), record)
    notify_systemd("READY=1")
    print(
        f"kubelet stand-in: node {flags['hostname-override']} up in {observed['cgroup']} "
        f"(cpus {record['cpus_allowed_list']}, mems {record['mems_allowed_list']}); "
        f"listening: {', '.join(listening)}",
        file=sys.stderr,
        flush=True,
    )
    while True:
        time.sleep(3600)


def main() -> int:
    try:
        return run(sys.argv[1:])
    except StandinError as error:
        print(error, file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
