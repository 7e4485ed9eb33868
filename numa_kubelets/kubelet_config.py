"""User `kubeletConfig`: the KubeletConfiguration schema, strict validation, the merge, and what the program adds.

`kubeletConfig` may be set at stack, host and kubelet level and is deep-merged in that order
(maps merge key by key, lists and scalars replace). Each layer is checked like the kubelet's
strict decoder checks a file (unknown fields, wrong types), plus the fields the program must
own to keep the split correct. The merged result is checked against the declared
`kubeletVersion`, and the NUMA-derived settings (reservedSystemCPUs, policy options) are added.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import feature_gates
from .cpulist import CpuSet
from .problems import Problem

# The schema below is `k8s.io/kubelet/config/v1beta1` of Kubernetes 1.37 (v0.37.2), the release
# the real-kubelet tests run; tests/realcluster/test_kubelet_schema.py compares it with the
# real Go types (tools/kubernetes/kubeletschema).
SCHEMA_KUBELET_VERSION = "1.37"
SUPPORTED_KUBELET_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
DEFAULT_KUBELET_VERSION = SUPPORTED_KUBELET_VERSIONS[0]
# Above this many NUMA nodes the topology manager refuses to start unless told otherwise.
TOPOLOGY_MANAGER_MAX_NUMA_NODES = 8
# The kubelet's default hard eviction threshold for memory (v1beta1 defaults).
DEFAULT_EVICTION_HARD_MEMORY = "100Mi"

# ------------------------------------------------------------------ schema as data

BOOL, INT, FLOAT, STR, DURATION, ANY = "bool", "int", "float", "string", "duration", "any"


@dataclass(frozen=True)
class ListOf:
    item: FieldType


@dataclass(frozen=True)
class MapOf:
    value: FieldType


@dataclass(frozen=True)
class Obj:
    fields: Mapping[str, FieldType]


FieldType = str | ListOf | MapOf | Obj

STR_LIST, STR_MAP = ListOf(STR), MapOf(STR)

KUBELET_FIELDS: Mapping[str, FieldType] = {
    "enableServer": BOOL,
    "staticPodPath": STR,
    "podLogsDir": STR,
    "syncFrequency": DURATION,
    "fileCheckFrequency": DURATION,
    "httpCheckFrequency": DURATION,
    "staticPodURL": STR,
    "staticPodURLHeader": MapOf(STR_LIST),
    "address": STR,
    "port": INT,
    "readOnlyPort": INT,
    "tlsCertFile": STR,
    "tlsPrivateKeyFile": STR,
    "tlsCipherSuites": STR_LIST,
    "tlsCurvePreferences": ListOf(INT),
    "tlsMinVersion": STR,
    "rotateCertificates": BOOL,
    "serverTLSBootstrap": BOOL,
    "authentication": Obj(
        {
            "x509": Obj({"clientCAFile": STR}),
            "webhook": Obj({"enabled": BOOL, "cacheTTL": DURATION}),
            "anonymous": Obj({"enabled": BOOL}),
        }
    ),
    "authorization": Obj(
        {"mode": STR, "webhook": Obj({"cacheAuthorizedTTL": DURATION, "cacheUnauthorizedTTL": DURATION})}
    ),
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
    "featureGates": MapOf(BOOL),
    "failSwapOn": BOOL,
    "memorySwap": Obj({"swapBehavior": STR}),
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
    # component-base LoggingConfiguration: open-ended `options`, flushFrequency number or duration.
    "logging": Obj(
        {
            "format": STR,
            "flushFrequency": ANY,
            "verbosity": INT,
            "vmodule": ListOf(Obj({"filePattern": STR, "verbosity": INT})),
            "options": MapOf(ANY),
        }
    ),
    "enableSystemLogHandler": BOOL,
    "enableSystemLogQuery": BOOL,
    "shutdownGracePeriod": DURATION,
    "shutdownGracePeriodCriticalPods": DURATION,
    "shutdownGracePeriodByPodPriority": ListOf(Obj({"priority": INT, "shutdownGracePeriodSeconds": INT})),
    "crashLoopBackOff": Obj({"maxContainerRestartPeriod": DURATION}),
    "reservedMemory": ListOf(Obj({"numaNode": INT, "limits": STR_MAP})),
    "enableProfilingHandler": BOOL,
    "enableDebugFlagsHandler": BOOL,
    "seccompDefault": BOOL,
    "memoryThrottlingFactor": FLOAT,
    "memoryReservationPolicy": STR,
    "registerWithTaints": ListOf(Obj({"key": STR, "value": STR, "effect": STR, "timeAdded": STR})),
    "registerNode": BOOL,
    "tracing": Obj({"endpoint": STR, "samplingRatePerMillion": INT}),
    "localStorageCapacityIsolation": BOOL,
    "containerRuntimeEndpoint": STR,
    "imageServiceEndpoint": STR,
    "failCgroupV1": BOOL,
    "userNamespaces": Obj({"idsPerPod": INT}),
}

ENUMS: Mapping[str, tuple[str, ...]] = {
    "cpuManagerPolicy": ("none", "static"),
    "memoryManagerPolicy": ("None", "Static"),
    "topologyManagerPolicy": ("none", "best-effort", "restricted", "single-numa-node"),
    "topologyManagerScope": ("container", "pod"),
}


@dataclass(frozen=True)
class Maturity:
    """When a policy option appeared at each stage (None: never reached it)."""

    alpha: str | None
    beta: str | None
    ga: str | None

    def stage(self, version: str) -> str | None:
        for name, since in (("GA", self.ga), ("beta", self.beta), ("alpha", self.alpha)):
            if since is not None and version_key(version) >= version_key(since):
                return name
        return None

    def describe(self) -> str:
        stages = [f"{name} {since}" for name, since in (("alpha", self.alpha), ("beta", self.beta), ("GA", self.ga))]
        return ", ".join(s for s in stages if not s.endswith("None"))


@dataclass(frozen=True)
class OptionFamily:
    field: str
    alpha_gate: str
    beta_gate: str
    options: Mapping[str, Maturity]


CPU_MANAGER_OPTIONS = OptionFamily(
    "cpuManagerPolicyOptions",
    "CPUManagerPolicyAlphaOptions",
    "CPUManagerPolicyBetaOptions",
    {
        "full-pcpus-only": Maturity("1.22", "1.23", "1.33"),
        "distribute-cpus-across-numa": Maturity("1.23", "1.33", None),
        "align-by-socket": Maturity("1.25", None, None),
        "distribute-cpus-across-cores": Maturity("1.31", None, None),
        "strict-cpu-reservation": Maturity("1.32", "1.33", "1.35"),
        "prefer-align-cpus-by-uncorecache": Maturity("1.32", "1.34", None),
    },
)
TOPOLOGY_MANAGER_OPTIONS = OptionFamily(
    "topologyManagerPolicyOptions",
    "TopologyManagerPolicyAlphaOptions",
    "TopologyManagerPolicyBetaOptions",
    {
        "prefer-closest-numa-nodes": Maturity("1.26", "1.28", "1.32"),
        "max-allowable-numa-nodes": Maturity(None, "1.31", "1.35"),
    },
)
OPTION_FAMILIES = (CPU_MANAGER_OPTIONS, TOPOLOGY_MANAGER_OPTIONS)

# Fields (or a map key inside one) the program sets itself, and what to use instead.
_PORTS = "ports are per kubelet: use hosts[].kubelets[].{key}"
OWNED: Mapping[tuple[str, ...], str] = {
    ("apiVersion",): "written by numa-kubelets",
    ("kind",): "written by numa-kubelets",
    ("cgroupRoot",): "each kubelet's pods live in its NUMA node's slice (/numa<N>); set by numa-kubelets",
    ("cgroupDriver",): "numa-kubelets runs kubelets and containerd with the systemd cgroup driver",
    ("cgroupsPerQOS",): "numa-kubelets enforces node allocatable on pods, which needs QoS cgroups",
    ("enforceNodeAllocatable",): "numa-kubelets enforces allocatable on pods only; "
    "system-reserved enforcement would confine the host's services to the other NUMA nodes' share",
    ("containerRuntimeEndpoint",): "each kubelet talks to its own containerd@numa<N>; set by numa-kubelets",
    ("imageServiceEndpoint",): "each kubelet talks to its own containerd@numa<N>; set by numa-kubelets",
    ("port",): _PORTS.format(key="port"),
    ("healthzPort",): _PORTS.format(key="healthzPort"),
    ("readOnlyPort",): _PORTS.format(key="readOnlyPort"),
    ("maxPods",): "use hosts[].kubelets[].maxPods",
    ("podLogsDir",): "each kubelet needs its own (/var/log/pods-numa<N>): container GC removes log "
    "directories of pods it does not know",
    ("rotateCertificates",): "follows cluster: client certificates rotate when kubelets join a cluster",
    ("serverTLSBootstrap",): "use cluster.servingCertificates",
    ("registerWithTaints",): "use hosts[].kubelets[].taints",
    ("reservedSystemCPUs",): "computed by numa-kubelets with cpuManagerPolicy: static "
    "(every online CPU outside the kubelet's slice)",
    ("reservedMemory",): "computed on the host by numa-kubelets with memoryManagerPolicy: Static "
    "(the other NUMA nodes' memory, so that the sum rule holds to the byte)",
    ("systemReserved", "cpu"): "computed by numa-kubelets: the CPUs outside the kubelet's slice; use kubeReserved.cpu",
    ("systemReserved", "memory"): "computed on the host by numa-kubelets: the memory outside the kubelet's NUMA node; "
    "use kubeReserved.memory",
}
OWNED_WITH_CLUSTER: Mapping[tuple[str, ...], str] = {
    ("authentication",): "with a cluster, numa-kubelets authenticates by client certificate (cluster.caCert) "
    "and webhook",
    ("authorization",): "with a cluster, numa-kubelets authorizes through the API server (Webhook)",
}
RESERVABLE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")

_QUANTITY = re.compile(r"^([+]?[0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_DURATION = re.compile(r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$")
_VERSION = re.compile(r"^1\.([0-9]+)$")
_BINARY_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIX = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def version_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def quantity_bytes(text: str) -> int | None:
    """A memory quantity in bytes ("100Mi", "1G", "1048576"); None when it is not one (e.g. "5%")."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    number, suffix = match.groups()
    scale = _BINARY_SUFFIX.get(suffix or "") or _DECIMAL_SUFFIX.get(suffix or "") or 1
    whole, _, fraction = number.lstrip("+").partition(".")
    value = int(whole) * scale + (int(fraction) * scale) // 10 ** len(fraction) if fraction else int(whole) * scale
    if fraction and (int(fraction) * scale) % 10 ** len(fraction):
        return None  # a fraction of a byte
    return value


# ------------------------------------------------------------------ one layer


def _type_name(kind: FieldType) -> str:
    if isinstance(kind, ListOf):
        return f"a list of {_type_name(kind.item)}"
    if isinstance(kind, MapOf):
        return f"a map of {_type_name(kind.value)}"
    if isinstance(kind, Obj):
        return "an object"
    return {BOOL: "a boolean", INT: "an integer", FLOAT: "a number", STR: "a string", DURATION: "a duration"}.get(
        kind, kind
    )


def type_problems(value: Any, kind: FieldType, path: str) -> list[Problem]:
    """What the kubelet's strict decoder would refuse in `value`."""
    if kind == ANY:
        return []
    if isinstance(kind, Obj):
        if not isinstance(value, dict):
            return [Problem(path, f"must be {_type_name(kind)}")]
        problems = []
        for key, item in value.items():
            if key not in kind.fields:
                problems.append(Problem(f"{path}.{key}", f"unknown field (known: {', '.join(kind.fields)})"))
            else:
                problems += type_problems(item, kind.fields[key], f"{path}.{key}")
        return problems
    if isinstance(kind, MapOf):
        if not isinstance(value, dict):
            return [Problem(path, f"must be {_type_name(kind)}")]
        return [p for key, item in value.items() for p in type_problems(item, kind.value, f"{path}.{key}")]
    if isinstance(kind, ListOf):
        if not isinstance(value, list):
            return [Problem(path, f"must be {_type_name(kind)}")]
        return [p for index, item in enumerate(value) for p in type_problems(item, kind.item, f"{path}[{index}]")]
    is_int = isinstance(value, int) and not isinstance(value, bool)
    ok = {
        BOOL: isinstance(value, bool),
        INT: is_int,
        FLOAT: is_int or isinstance(value, float),
        STR: isinstance(value, str),
        DURATION: isinstance(value, str) and _DURATION.match(value) is not None,
    }[kind]
    if ok:
        return []
    if kind == DURATION and isinstance(value, str):
        return [Problem(path, f"{value!r} is not a duration (e.g. 10s, 5m, 1h30m)")]
    return [Problem(path, f"must be {_type_name(kind)}, not {type(value).__name__} {value!r}")]


def layer_problems(layer: Any, path: str, version: str, joined_to_cluster: bool) -> list[Problem]:
    """Problems of one `kubeletConfig` mapping on its own: unknown, mistyped and owned fields, values."""
    if not isinstance(layer, dict):
        return [Problem(path, "must be a mapping of KubeletConfiguration fields")]
    problems: list[Problem] = []
    owned = {**OWNED, **(OWNED_WITH_CLUSTER if joined_to_cluster else {})}
    for field, value in layer.items():
        field_path = f"{path}.{field}"
        if (field,) in owned:
            problems.append(Problem(field_path, f"owned by numa-kubelets: {owned[(field,)]}"))
            continue
        if field not in KUBELET_FIELDS:
            problems.append(
                Problem(
                    field_path,
                    f"unknown KubeletConfiguration field (kubelet.config.k8s.io/v1beta1, Kubernetes {SCHEMA_KUBELET_VERSION})",
                )
            )
            continue
        found = type_problems(value, KUBELET_FIELDS[field], field_path)
        if found:
            problems += found
            continue
        if isinstance(value, dict):
            for key in value:
                if (field, key) in owned:
                    problems.append(Problem(f"{field_path}.{key}", f"owned by numa-kubelets: {owned[(field, key)]}"))
        problems += _value_problems(field, value, field_path, version)
    return problems


def _value_problems(field: str, value: Any, path: str, version: str) -> list[Problem]:
    problems = []
    if field in ENUMS and value not in ENUMS[field]:
        problems.append(Problem(path, f"{value!r} is not one of {', '.join(ENUMS[field])}"))
    if field in ("systemReserved", "kubeReserved"):
        for resource, quantity in value.items():
            if resource not in RESERVABLE_RESOURCES:
                problems.append(
                    Problem(f"{path}.{resource}", f"not reservable (only {', '.join(RESERVABLE_RESOURCES)})")
                )
            elif _QUANTITY.match(quantity) is None:
                problems.append(Problem(f"{path}.{resource}", f"{quantity!r} is not a quantity"))
    if field in ("evictionHard", "evictionSoft", "evictionMinimumReclaim"):
        for signal, threshold in value.items():
            if _QUANTITY.match(threshold) is None and re.match(r"^[0-9]+(\.[0-9]+)?%$", threshold) is None:
                problems.append(Problem(f"{path}.{signal}", f"{threshold!r} is not a quantity or percentage"))
    for family in OPTION_FAMILIES:
        if field == family.field:
            for option in value:
                problems += _option_problems(family, option, f"{path}.{option}", version)
    return problems


def _option_problems(family: OptionFamily, option: str, path: str, version: str) -> list[Problem]:
    maturity = family.options.get(option)
    if maturity is None:
        return [Problem(path, f"unknown option (known: {', '.join(family.options)})")]
    if maturity.stage(version) is None:
        return [
            Problem(
                path,
                f"kubelet {version} (kubeletVersion) has no {option} ({maturity.describe()}); "
                "raise kubeletVersion once every host runs a kubelet that has it",
            )
        ]
    return []


# ------------------------------------------------------------------ merged


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Maps merge key by key; anything else in `override` replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class KubeletSettings:
    """The merged user fields of one kubelet and what the program derives from them."""

    user_fields_json: str  # canonical JSON of the merged kubeletConfig
    origins_json: str  # field -> config path of the layer that set it last
    version: str
    reserved_system_cpus: CpuSet | None  # with cpuManagerPolicy static
    numa_node_count: int

    @property
    def user_fields(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.user_fields_json)
        return result

    def layer_of(self, key: str) -> str:
        """The config path of the layer that set `key` (a field, or featureGates.<name>) last."""
        origins: dict[str, str] = json.loads(self.origins_json)
        return origins[key]

    def origin(self, field: str) -> str:
        return f"{self.layer_of(field)}.{field}"

    @property
    def cpu_manager_policy(self) -> str:
        return str(self.user_fields.get("cpuManagerPolicy", "none"))

    @property
    def memory_manager_policy(self) -> str:
        return str(self.user_fields.get("memoryManagerPolicy", "None"))

    @property
    def topology_manager_policy(self) -> str:
        return str(self.user_fields.get("topologyManagerPolicy", "none"))

    def _gate(self, name: str, default: bool) -> bool:
        gates = self.user_fields.get("featureGates", {})
        return bool(gates.get(name, default))

    def option_usable(self, family: OptionFamily, option: str) -> bool:
        """The option exists in the declared version and its stage's feature gate is on."""
        stage = family.options[option].stage(self.version)
        if stage == "GA":
            return True
        if stage == "beta":
            return self._gate(family.beta_gate, True)
        if stage == "alpha":
            return self._gate(family.alpha_gate, False)
        return False

    @property
    def cpu_manager_options(self) -> dict[str, str]:
        options = dict(self.user_fields.get(CPU_MANAGER_OPTIONS.field, {}))
        if self.cpu_manager_policy == "static" and self.option_usable(CPU_MANAGER_OPTIONS, "strict-cpu-reservation"):
            # Burstable and best-effort pods stay off the reserved CPUs (the other NUMA nodes') too.
            options.setdefault("strict-cpu-reservation", "true")
        return options

    @property
    def topology_manager_options(self) -> dict[str, str]:
        options = dict(self.user_fields.get(TOPOLOGY_MANAGER_OPTIONS.field, {}))
        if self.topology_manager_policy != "none" and self.numa_node_count > TOPOLOGY_MANAGER_MAX_NUMA_NODES:
            options.setdefault("max-allowable-numa-nodes", str(self.numa_node_count))
        return options

    @property
    def memory_reserved_on_own_node_bytes(self) -> int:
        """kubeReserved.memory + the hard eviction threshold: the share of reservedMemory not in systemReserved."""
        fields = self.user_fields
        kube = quantity_bytes(fields.get("kubeReserved", {}).get("memory", "0")) or 0
        if "evictionHard" in fields:
            default = DEFAULT_EVICTION_HARD_MEMORY if fields.get("mergeDefaultEvictionSettings") else "0"
            eviction_text = fields["evictionHard"].get("memory.available", default)
        else:
            eviction_text = DEFAULT_EVICTION_HARD_MEMORY
        return kube + (quantity_bytes(eviction_text) or 0)

    def rendered_fields(self) -> dict[str, Any]:
        """What goes into the kubelet's KubeletConfiguration beyond the program's own fields."""
        fields = self.user_fields
        if self.reserved_system_cpus is not None:
            fields["reservedSystemCPUs"] = self.reserved_system_cpus.format()
        for family, options in (
            (CPU_MANAGER_OPTIONS, self.cpu_manager_options),
            (TOPOLOGY_MANAGER_OPTIONS, self.topology_manager_options),
        ):
            if options:
                fields[family.field] = dict(sorted(options.items()))
        return fields

    @property
    def cpu_manager_identity(self) -> str:
        """What a cpu_manager_state file belongs to: a change means the kubelet refuses the old file."""
        if self.cpu_manager_policy != "static" or self.reserved_system_cpus is None:
            return self.cpu_manager_policy
        return f"{self.cpu_manager_policy} reservedSystemCPUs={self.reserved_system_cpus.format()}"


def resolve(
    layers: Sequence[tuple[str, Mapping[str, Any]]],
    version: str,
    online_cpus: CpuSet,
    slice_cpus: CpuSet,
    numa_node_count: int,
) -> KubeletSettings:
    """Merge the layers (lowest first, each with its config path) and derive the kubelet's settings."""
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for path, layer in layers:
        merged = deep_merge(merged, layer)
        origins.update(dict.fromkeys(layer, path))
        # Gates merge key by key, so each has its own origin (feature_gate_problems).
        gates = layer.get("featureGates", {})
        origins.update(dict.fromkeys((f"featureGates.{name}" for name in gates), path))
    static = merged.get("cpuManagerPolicy") == "static"
    return KubeletSettings(
        user_fields_json=json.dumps(merged, sort_keys=True),
        origins_json=json.dumps(origins, sort_keys=True),
        version=version,
        reserved_system_cpus=(online_cpus - slice_cpus) if static else None,
        numa_node_count=numa_node_count,
    )


def settings_problems(settings: KubeletSettings) -> list[Problem]:
    """Problems only the merged configuration of one kubelet shows."""
    problems: list[Problem] = []
    fields = settings.user_fields
    for family in OPTION_FAMILIES:
        for option in fields.get(family.field, {}):
            maturity = family.options[option]
            if maturity.stage(settings.version) is not None and not settings.option_usable(family, option):
                stage = maturity.stage(settings.version)
                gate, value = (family.alpha_gate, "true") if stage == "alpha" else (family.beta_gate, "true")
                problems.append(
                    Problem(
                        f"{settings.origin(family.field)}.{option}",
                        f"{option} is {stage} in kubelet {settings.version}: it needs featureGates.{gate}: {value}",
                    )
                )
    if fields.get(CPU_MANAGER_OPTIONS.field) and settings.cpu_manager_policy != "static":
        problems.append(
            Problem(
                settings.origin(CPU_MANAGER_OPTIONS.field), "CPU manager policy options need cpuManagerPolicy: static"
            )
        )
    if fields.get(TOPOLOGY_MANAGER_OPTIONS.field) and settings.topology_manager_policy == "none":
        problems.append(
            Problem(
                settings.origin(TOPOLOGY_MANAGER_OPTIONS.field),
                "topology manager policy options need a topologyManagerPolicy other than none",
            )
        )
    if (
        settings.topology_manager_policy != "none"
        and settings.numa_node_count > TOPOLOGY_MANAGER_MAX_NUMA_NODES
        and not settings.option_usable(TOPOLOGY_MANAGER_OPTIONS, "max-allowable-numa-nodes")
    ):
        problems.append(
            Problem(
                settings.origin("topologyManagerPolicy"),
                f"the host has {settings.numa_node_count} NUMA nodes; the topology manager refuses more than "
                f"{TOPOLOGY_MANAGER_MAX_NUMA_NODES} without max-allowable-numa-nodes, which kubelet {settings.version} "
                f"(kubeletVersion) cannot use ({TOPOLOGY_MANAGER_OPTIONS.options['max-allowable-numa-nodes'].describe()})",
            )
        )
    if settings.memory_manager_policy == "Static":
        problems += _static_memory_problems(settings)
    problems += feature_gate_problems(settings)
    return problems


def feature_gate_problems(settings: KubeletSettings) -> list[Problem]:
    """The merged featureGates at this kubelet's version: each gate where it was set last, and
    the dependencies of the whole map (a layer alone may be fine where the merged map is not)."""
    gates = settings.user_fields.get("featureGates", {})
    problems = []
    for name, value in gates.items():
        layer = settings.layer_of(f"featureGates.{name}")
        problems += feature_gates.gate_problems({name: value}, f"{layer}.featureGates", settings.version)
    if gates:
        problems += feature_gates.dependency_problems(gates, settings.origin("featureGates"), settings.version)
    return problems


def _static_memory_problems(settings: KubeletSettings) -> list[Problem]:
    """The reservedMemory sum rule is computed to the byte: every term must be an exact quantity."""
    fields = settings.user_fields
    problems = []
    terms = [("kubeReserved", "memory"), ("evictionHard", "memory.available")]
    for field, key in terms:
        text = fields.get(field, {}).get(key)
        if text is not None and quantity_bytes(text) is None:
            problems.append(
                Problem(
                    f"{settings.origin(field)}.{key}",
                    f"{text!r}: with memoryManagerPolicy: Static give an exact quantity (e.g. 100Mi), "
                    "so reservedMemory can be computed to the byte",
                )
            )
    return problems


def kubelet_version_problems(version: Any, path: str) -> list[Problem]:
    if not isinstance(version, str) or _VERSION.match(version) is None:
        return [Problem(path, f"must be a Kubernetes minor version like {DEFAULT_KUBELET_VERSION!r}")]
    if version not in SUPPORTED_KUBELET_VERSIONS:
        return [Problem(path, f"{version} is not supported (supported: {', '.join(SUPPORTED_KUBELET_VERSIONS)})")]
    return []
