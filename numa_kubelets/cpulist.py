"""The kernel's cpulist syntax ("0-3,8-11", "0,2,4") as an immutable set of non-negative ints.

The same syntax names memory nodes (cpuset.mems), so `CpuSet` serves both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_ITEM = re.compile(r"(0|[1-9][0-9]*)(?:-(0|[1-9][0-9]*))?")
# Far above any real machine; keeps a typo like "0-99999999" from allocating a huge set.
MAX_CPU = 65535


class CpuListError(ValueError):
    """A string is not a valid kernel cpulist."""


class CpuSet:
    __slots__ = ("_members",)

    def __init__(self, members: Iterable[int] = ()) -> None:
        frozen = frozenset(members)
        for member in frozen:
            if not isinstance(member, int) or isinstance(member, bool) or not 0 <= member <= MAX_CPU:
                raise CpuListError(f"{member!r} is not a CPU number between 0 and {MAX_CPU}")
        self._members = frozen

    @classmethod
    def parse(cls, text: str) -> CpuSet:
        """Parse strictly: no whitespace, no empty items, ranges ascending, no leading zeros.

        The empty string is the empty set (a memory-only NUMA node has an empty cpulist).
        """
        if not isinstance(text, str):
            raise CpuListError(f"expected a cpulist string, got {type(text).__name__}")
        if text == "":
            return cls()
        members: set[int] = set()
        for item in text.split(","):
            match = _ITEM.fullmatch(item)
            if match is None:
                raise CpuListError(f"{text!r} is not a cpulist: bad item {item!r} (expected N or N-M)")
            first = int(match.group(1))
            last = int(match.group(2)) if match.group(2) is not None else first
            if last < first:
                raise CpuListError(f"{text!r} is not a cpulist: range {item!r} is descending")
            if last > MAX_CPU:
                raise CpuListError(f"{text!r} is not a cpulist: {last} is above {MAX_CPU}")
            members.update(range(first, last + 1))
        return cls(members)

    def ranges(self) -> list[tuple[int, int]]:
        """Maximal runs of consecutive members, ascending."""
        runs: list[tuple[int, int]] = []
        for member in sorted(self._members):
            if runs and runs[-1][1] == member - 1:
                runs[-1] = (runs[-1][0], member)
            else:
                runs.append((member, member))
        return runs

    def format(self) -> str:
        """Canonical form: ascending, maximal ranges, "N" for singletons, "N-M" otherwise."""
        return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in self.ranges())

    def lowest(self) -> int:
        return min(self._members)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"CpuSet({self.format()!r})"

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._members))

    def __len__(self) -> int:
        return len(self._members)

    def __bool__(self) -> bool:
        return bool(self._members)

    def __contains__(self, item: object) -> bool:
        return item in self._members

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CpuSet) and self._members == other._members

    def __hash__(self) -> int:
        return hash(self._members)

    def __or__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._members | other._members)

    def __and__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._members & other._members)

    def __sub__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._members - other._members)

    def issubset(self, other: CpuSet) -> bool:
        return self._members <= other._members

    def isdisjoint(self, other: CpuSet) -> bool:
        return self._members.isdisjoint(other._members)
