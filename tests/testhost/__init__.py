"""An emulated multi-socket NUMA machine (qemu) that the tests build and boot themselves.

    image = ensure_image()                  # cached build (mmdebstrap + mkfs.ext4)
    with boot([[0, 1, 2, 3], [4, 5, 6, 7]], workdir) as host:
        host.run("cat /sys/devices/system/node/node1/cpulist").stdout

See README.md in this directory.
"""

from .host import DEFAULT_BOOT_TIMEOUT, DEFAULT_MEMORY_MIB, TestHost, boot
from .image import DEFAULT_CACHE_DIR, Image, ensure_image
from .ssh import RemoteCommandError, RunResult
from .tools import TestHostError
from .topology import ORIGIN, Topology, format_cpulist, parse_cpulist

__all__ = [
    "DEFAULT_BOOT_TIMEOUT",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_MEMORY_MIB",
    "ORIGIN",
    "Image",
    "RemoteCommandError",
    "RunResult",
    "TestHost",
    "TestHostError",
    "Topology",
    "boot",
    "ensure_image",
    "format_cpulist",
    "parse_cpulist",
]
