"""Writes the generated pages of the documentation, or checks that the committed ones are current.

    python -m numa_kubelets.docgen           # (re)writes docs/reference/*.md
    python -m numa_kubelets.docgen --check   # exit 1 naming each page that is out of date

Run from the repository root (the pages and the example stack file are found from there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from .output_reference import outputs_reference
from .picture import partitions_page
from .plan import Plan
from .reference import configuration_reference
from .review import plan_from_stack

EXAMPLE_STACK = "Pulumi.dev.yaml"
# The stacks whose hosts the partition page draws.
PICTURED_STACKS = (EXAMPLE_STACK, "Pulumi.example-cluster.yaml")


def _plan(root: Path, stack_file: str) -> Plan:
    return plan_from_stack(yaml.safe_load((root / stack_file).read_text()))[1]


def generated_pages(root: Path) -> dict[Path, str]:
    return {
        root / "docs/reference/configuration.md": configuration_reference(),
        root / "docs/reference/outputs.md": outputs_reference(
            _plan(root, EXAMPLE_STACK), f"dev stack (`{EXAMPLE_STACK}`)"
        ),
        root / "docs/reference/partitions.md": partitions_page(
            {stack_file: _plan(root, stack_file) for stack_file in PICTURED_STACKS}
        ),
    }


def stale_pages(root: Path) -> list[Path]:
    return [path for path, text in generated_pages(root).items() if not path.exists() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numa_kubelets.docgen", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the committed pages are current")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository root (default: here)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages(args.root)
        for path in stale:
            print(f"{path}: out of date; run python -m numa_kubelets.docgen", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated_pages(args.root).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
