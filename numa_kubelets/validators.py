"""Syntax of the strings the configuration accepts.

Every value that reaches a shell script or a unit file passes one of these patterns, so no
value can carry a newline, a quote, `$`, `;` or a space into generated text.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*")
UNIX_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
ABSOLUTE_PATH = re.compile(r"(/[A-Za-z0-9._+-]+)+")
HOST_KEY = re.compile(
    r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com) [A-Za-z0-9+/]+={0,3}"
)
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
BOOTSTRAP_TOKEN = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}")
# An image reference: [registry[:port]/]path[:tag][@digest], lowercase path components.
IMAGE_REFERENCE = re.compile(
    r"([a-zA-Z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?"
)
SERVER_URL = re.compile(r"https://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?")
PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----\n([A-Za-z0-9+/=\n]+)\n-----END CERTIFICATE-----\n?")
DURATION = re.compile(r"([1-9][0-9]*)(s|m|h)")
# Kubernetes reserves these label prefixes; the NodeRestriction admission plugin only lets a
# kubelet set labels under them from this allow-list.
RESERVED_LABEL_SUFFIXES = ("kubernetes.io", "k8s.io")
KUBELET_SETTABLE_PREFIXES = ("kubelet.kubernetes.io", "node.kubernetes.io")
AUTOMATIC_LABEL_PREFIX = "numa-kubelets.io"


def check_dns_label(value: str) -> str:
    if not DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters)"
        )
    return value


def check_dns_name(value: str) -> str:
    if not DNS_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a DNS-1123 subdomain (lowercase labels joined by '.')")
    return value


def check_address(value: str) -> str:
    if "%" in value:
        # ipaddress accepts any text as an IPv6 scope id; none is needed to reach a server.
        raise ValueError(f"{value!r}: IPv6 scope ids (%...) are not supported")
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if not DNS_NAME.fullmatch(value.lower()):
        raise ValueError(f"{value!r} is neither an IP address nor a DNS name")
    return value


def check_unix_user(value: str) -> str:
    if not UNIX_USER.fullmatch(value):
        raise ValueError(f"{value!r} is not a valid user name")
    return value


def check_absolute_path(value: str) -> str:
    if not ABSOLUTE_PATH.fullmatch(value) or "/../" in value + "/" or "/./" in value + "/":
        raise ValueError(f"{value!r} is not a plain absolute path (letters, digits, '.', '_', '+', '-' between '/')")
    return value


def check_host_key(value: str) -> str:
    key = value.strip()
    parts = key.split(" ")
    if len(parts) == 3 and "\n" not in key:
        key = " ".join(parts[:2])  # a trailing comment, as in known_hosts, is dropped
    if not HOST_KEY.fullmatch(key):
        raise ValueError(
            "is not an SSH public host key of the form '<type> <base64>' "
            "(e.g. the output of 'ssh-keyscan -t ed25519 HOST' without the host name)"
        )
    return key


def _qualified_name_prefix(key: str, what: str) -> str:
    """The prefix of a Kubernetes qualified name ([prefix/]name), after checking its syntax."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        raise ValueError(f"{what} {key!r} has an empty prefix")
    if prefix and not DNS_NAME.fullmatch(prefix):
        raise ValueError(f"{what} {key!r}: prefix {prefix!r} is not a DNS-1123 subdomain")
    if not LABEL_NAME.fullmatch(name):
        raise ValueError(
            f"{what} {key!r}: name {name!r} must be at most 63 characters of letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return prefix


def _under(prefix: str, domain: str) -> bool:
    return prefix == domain or prefix.endswith("." + domain)


def check_taint_key(key: str) -> str:
    prefix = _qualified_name_prefix(key, "taint key")
    if _under(prefix, AUTOMATIC_LABEL_PREFIX):
        raise ValueError(f"taint key {key!r}: the {AUTOMATIC_LABEL_PREFIX}/ prefix is reserved for numa-kubelets")
    if any(_under(prefix, s) for s in RESERVED_LABEL_SUFFIXES):
        # node.kubernetes.io/not-ready and the like belong to the node lifecycle controller.
        raise ValueError(f"taint key {key!r}: taints under {prefix}/ are managed by Kubernetes itself")
    return key


def check_label_key(key: str) -> str:
    prefix = _qualified_name_prefix(key, "label key")
    if _under(prefix, AUTOMATIC_LABEL_PREFIX):
        raise ValueError(f"label key {key!r}: the {AUTOMATIC_LABEL_PREFIX}/ prefix is set by numa-kubelets itself")
    reserved = any(_under(prefix, s) for s in RESERVED_LABEL_SUFFIXES)
    settable = any(_under(prefix, p) for p in KUBELET_SETTABLE_PREFIXES)
    if reserved and not settable:
        raise ValueError(
            f"label key {key!r}: a kubelet may not set labels under {prefix}/ "
            "(NodeRestriction allows only kubelet.kubernetes.io/ and node.kubernetes.io/)"
        )
    return key


def check_label_value(value: str) -> str:
    if not LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"label value {value!r} must be empty or at most 63 characters of letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit"
        )
    return value


def check_bootstrap_token(value: str) -> str:
    if not BOOTSTRAP_TOKEN.fullmatch(value):
        # Never echo the value: it is a secret.
        raise ValueError("is not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}")
    return value


def check_image(value: str) -> str:
    if len(value) > 255 or not IMAGE_REFERENCE.fullmatch(value):
        raise ValueError(f"{value!r} is not a container image reference")
    return value


def check_server_url(value: str) -> str:
    match = SERVER_URL.fullmatch(value)
    if not match:
        raise ValueError(f"{value!r} is not an https:// URL of an API server")
    port = match.group(2)
    if port and not 1 <= int(port[1:]) <= 65535:
        raise ValueError(f"{value!r}: port {port[1:]} is out of range")
    return value


def check_pem_certificate(value: str) -> str:
    text = value.strip() + "\n"
    match = PEM_CERTIFICATE.fullmatch(text)
    if not match:
        raise ValueError("is not a single PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)")
    try:
        base64.b64decode("".join(match.group(1).split()), validate=True)
    except (binascii.Error, ValueError) as error:
        raise ValueError(f"PEM body is not valid base64: {error}") from None
    return text


def check_duration(value: str) -> str:
    if not DURATION.fullmatch(value):
        raise ValueError(f"{value!r} is not a duration such as '90s', '10m' or '1h'")
    return value


def check_ip_address(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address") from None
    if "%" in value:  # ipaddress accepts any text as an IPv6 scope id
        raise ValueError(f"{value!r}: IPv6 scope ids (%...) are not supported")
    return value


def duration_seconds(value: str) -> int:
    """A checked duration ('90s', '10m', '1h') in seconds."""
    match = DURATION.fullmatch(check_duration(value))
    assert match is not None
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


def check_command_argument(value: str) -> str:
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise ValueError(f"{value!r} contains a control character")
    return value


# Linux interface names: at most IFNAMSIZ - 1 = 15 bytes, no '/', ':', whitespace (dev_valid_name);
# we also keep them to characters that need no quoting in a unit file or a shell script.
INTERFACE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")


def check_interface_name(value: str) -> str:
    if not INTERFACE_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a network interface name (1-15 characters: letters, digits, '_', '.', '-', "
            "not starting with '.' or '-')"
        )
    return value


def check_ipv4_address(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 address") from None
    return value


def check_ipv4_interface(value: str) -> str:
    """An address with its prefix length (CIDR), e.g. 192.0.2.21/24."""
    if "/" not in value:
        raise ValueError(f"{value!r} needs a prefix length, e.g. {value}/24")
    try:
        interface = ipaddress.IPv4Interface(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 address with a prefix length (CIDR)") from None
    if str(interface) != value:
        raise ValueError(f"{value!r} is not in canonical form (write {interface})")
    return value


# PCI devices (the device inventory of hosts[].numaNodes[].pciDevices and hosts[].pciDevices), as
# sysfs writes them: `/sys/bus/pci/devices/<dddd:bb:dd.f>` and its `class` (0x + 6 hex digits),
# `vendor` and `device` files (0x + 4 hex digits), lowercase.
PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]")
PCI_CLASS = re.compile(r"0x[0-9a-f]{6}")
PCI_CLASS_PREFIX = re.compile(r"0x(?:[0-9a-f]{2}){1,3}")
PCI_ID = re.compile(r"0x[0-9a-f]{4}")
# A kernel driver's name as the basename of sysfs' `driver` link (vfio-pci, nvme, mlx5_core).
DRIVER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# A glob of device nodes under /dev: no '..', nothing a shell or a YAML file would interpret
# beyond the glob characters themselves (the host side matches them with fnmatch, never a shell).
DEVICE_NODE_GLOB = re.compile(r"/dev(/[A-Za-z0-9._+*?\[\]-]+)+")
# The SR-IOV network device plugin's resourceName "should not contain special characters"
# (k8snetworkplumbingwg/sriov-network-device-plugin README, Config parameters).
SRIOV_RESOURCE_NAME = re.compile(r"[A-Za-z0-9_]+")
# Kubernetes' extended resources: pkg/apis/core/v1/helper/helpers.go IsExtendedResourceName.
EXTENDED_RESOURCE_DEFAULT_NAMESPACE = "kubernetes.io/"
QUOTA_REQUESTS_PREFIX = "requests."


def check_pci_address(value: str) -> str:
    if not PCI_ADDRESS.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a PCI address as sysfs writes it: domain:bus:device.function in lowercase hex "
            "(e.g. 0000:41:00.0)"
        )
    return value


def check_pci_class(value: str) -> str:
    if not PCI_CLASS.fullmatch(value):
        raise ValueError(f"{value!r} is not a PCI class as sysfs writes it: 0x and 6 lowercase hex digits (0x010802)")
    return value


def check_pci_class_prefix(value: str) -> str:
    if not PCI_CLASS_PREFIX.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a PCI class or its leading part: 0x and 2, 4 or 6 lowercase hex digits "
            "(0x01 mass storage, 0x0108 NVMe, 0x010802)"
        )
    return value


def check_pci_id(value: str) -> str:
    if not PCI_ID.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a PCI vendor or device id as sysfs writes it: 0x and 4 lowercase hex digits"
        )
    return value


def check_driver_name(value: str) -> str:
    if not DRIVER_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a kernel driver name (letters, digits, '_', '.', '-')")
    return value


def check_device_node_glob(value: str) -> str:
    if not DEVICE_NODE_GLOB.fullmatch(value) or "/../" in value + "/" or "/./" in value + "/":
        raise ValueError(
            f"{value!r} is not a glob of device nodes under /dev (letters, digits, '.', '_', '+', '-' and the glob "
            "characters '*', '?', '[', ']' between '/')"
        )
    return value


def check_extended_resource_name(value: str) -> str:
    """As the kubelet's device manager accepts a plugin's resource (IsExtendedResourceName): a
    `<domain>/<name>` qualified name outside the `kubernetes.io/` namespace, and one that is still
    a qualified name with `requests.` in front (the name ResourceQuota uses for it)."""
    domain, slash, name = value.partition("/")
    if not slash or not domain:
        raise ValueError(f"{value!r} is not an extended resource name: <domain>/<name>, e.g. example.com/nvme")
    if EXTENDED_RESOURCE_DEFAULT_NAMESPACE in value:
        raise ValueError(f"{value!r}: resources in the kubernetes.io/ namespace are Kubernetes' own, not extended")
    if value.startswith(QUOTA_REQUESTS_PREFIX):
        raise ValueError(f"{value!r}: an extended resource may not start with {QUOTA_REQUESTS_PREFIX!r}")
    if not DNS_NAME.fullmatch(QUOTA_REQUESTS_PREFIX + domain):
        raise ValueError(
            f"{value!r}: domain {domain!r} is not a DNS-1123 subdomain of at most "
            f"{253 - len(QUOTA_REQUESTS_PREFIX)} characters"
        )
    if not LABEL_NAME.fullmatch(name):
        raise ValueError(
            f"{value!r}: name {name!r} must be at most 63 characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return value
