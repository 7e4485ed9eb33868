"""Prints the numaNodes and a suggested systemCpus of a host, ready for the stack file.

python -m numa_kubelets.discover                      # this machine
python -m numa_kubelets.discover root@numa-a [-p 22]  # over SSH (your ssh config and agent)
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from .topology import READ_TOPOLOGY_SCRIPT, TopologyError, parse_topology, stack_snippet


def read_topology(destination: str | None, port: int, identity: str | None) -> str:
    if destination is None:
        command = ["sh", "-s"]
    else:
        command = ["ssh", "-p", str(port), "-o", "BatchMode=yes"]
        if identity:
            command += ["-i", identity]
        command += [destination, "sh -s"]
    result = subprocess.run(command, input=READ_TOPOLOGY_SCRIPT, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"discover: reading the topology failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numa_kubelets.discover", description=__doc__.splitlines()[0])
    parser.add_argument("destination", nargs="?", help="[user@]host to read over SSH; omitted: this machine")
    parser.add_argument("-p", "--port", type=int, default=22)
    parser.add_argument("-i", "--identity", help="SSH private key file")
    args = parser.parse_args(argv)
    try:
        topology = parse_topology(read_topology(args.destination, args.port, args.identity))
    except TopologyError as error:
        print(f"discover: unexpected topology readings: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(stack_snippet(topology))
    return 0


if __name__ == "__main__":
    sys.exit(main())
