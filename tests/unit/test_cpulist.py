"""The kernel cpulist syntax: strict parsing, canonical formatting, set algebra."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numa_kubelets.cpulist import MAX_CPU, CpuListError, CpuSet

cpu_numbers = st.integers(min_value=0, max_value=MAX_CPU)


@st.composite
def cpu_sets(draw) -> frozenset[int]:
    """Sets of CPU numbers, often made of runs (as real cpulists are), sometimes scattered."""
    runs = draw(st.lists(st.tuples(cpu_numbers, st.integers(0, 40)), max_size=6))
    scattered = draw(st.frozensets(cpu_numbers, max_size=6))
    members = set(scattered)
    for start, length in runs:
        members.update(range(start, min(start + length, MAX_CPU) + 1))
    return frozenset(members)


@st.composite
def spellings(draw) -> tuple[str, frozenset[int]]:
    """A valid but usually non-canonical cpulist for a non-empty set, and that set.

    Pieces may be out of order, overlap, repeat, split a run, or write a singleton as "N-N".
    """
    pieces = draw(st.lists(st.tuples(cpu_numbers, st.integers(0, 5)), min_size=1, max_size=8))
    items = []
    members: set[int] = set()
    for start, length in pieces:
        end = min(start + length, MAX_CPU)
        items.append(str(start) if start == end and draw(st.booleans()) else f"{start}-{end}")
        members.update(range(start, end + 1))
    items = draw(st.permutations(items))
    return ",".join(items), frozenset(members)


def is_canonical(text: str) -> bool:
    """Ascending, maximal ranges: "N" for a singleton, "N-M" with N < M, runs separated by a gap."""
    if text == "":
        return True
    previous_end = -2
    for item in text.split(","):
        match = re.fullmatch(r"(0|[1-9][0-9]*)(?:-(0|[1-9][0-9]*))?", item)
        if match is None:
            return False
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if match.group(2) is not None and end <= start:
            return False
        if start <= previous_end + 1:  # out of order, overlapping or adjacent: not maximal
            return False
        previous_end = end
    return True


# ---------------------------------------------------------------- examples


@pytest.mark.parametrize(
    ("text", "members"),
    [
        ("0-3,8-11", {0, 1, 2, 3, 8, 9, 10, 11}),
        ("0,2,4", {0, 2, 4}),
        ("0", {0}),
        ("1-3", {1, 2, 3}),
        ("0-1", {0, 1}),
        (f"{MAX_CPU}", {MAX_CPU}),
    ],
)
def test_kernel_style_cpulists_parse_and_format_back(text, members):
    cpus = CpuSet.parse(text)
    assert set(cpus) == members
    assert cpus.format() == text


def test_empty_string_is_the_empty_set():
    cpus = CpuSet.parse("")
    assert cpus == CpuSet()
    assert len(cpus) == 0
    assert not cpus
    assert cpus.format() == ""


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("3,1-2", "1-3"),
        ("0-0", "0"),
        ("2,0,1", "0-2"),
        ("0-2,1-3", "0-3"),
        ("0,0,0", "0"),
        ("4-5,0-1,2-3", "0-5"),
        ("7,5", "5,7"),
    ],
)
def test_non_canonical_spellings_format_canonically(spelling, canonical):
    assert CpuSet.parse(spelling).format() == canonical


def test_iteration_is_ascending_and_lowest_is_the_minimum():
    cpus = CpuSet.parse("9,2-3,7")
    assert list(cpus) == [2, 3, 7, 9]
    assert cpus.lowest() == 2


def test_str_is_the_canonical_form():
    assert str(CpuSet([4, 0, 5, 6])) == "0,4-6"


# ---------------------------------------------------------------- strict rejection


@pytest.mark.parametrize(
    "junk",
    [
        "3-1",
        "1-0",
        "a",
        "1,,2",
        "-1",
        " 1",
        "1 ",
        "1,",
        ",1",
        "01",
        "00",
        "0-01",
        "1-",
        "1--2",
        "1-2-3",
        "0x1",
        "1\n",
        "\n",
        "1;2",
        "$1",
        "1 2",
        "1.5",
        "+1",
        "\u0661",  # ARABIC-INDIC DIGIT ONE: a digit to str.isdigit, not to the kernel
        "1,2,",
        str(MAX_CPU + 1),
        f"0-{MAX_CPU + 1}",
        "99999999999999999999",
    ],
)
def test_junk_is_rejected(junk):
    with pytest.raises(CpuListError):
        CpuSet.parse(junk)


@pytest.mark.parametrize("not_text", [None, 3, ["0-3"], b"0-3"])
def test_non_strings_are_rejected(not_text):
    with pytest.raises(CpuListError):
        CpuSet.parse(not_text)


@pytest.mark.parametrize("member", [-1, MAX_CPU + 1, True, "1", 1.0])
def test_constructor_rejects_members_that_are_not_cpu_numbers(member):
    with pytest.raises(CpuListError):
        CpuSet([member])


def test_error_message_names_the_bad_item():
    with pytest.raises(CpuListError, match=r"'1--2'"):
        CpuSet.parse("0,1--2")


# ---------------------------------------------------------------- properties


@given(cpu_sets())
def test_format_then_parse_round_trips(members):
    cpus = CpuSet(members)
    assert CpuSet.parse(cpus.format()) == cpus
    assert set(CpuSet.parse(cpus.format())) == members


@given(cpu_sets())
def test_format_is_canonical(members):
    assert is_canonical(CpuSet(members).format())


@given(spellings())
def test_any_valid_spelling_parses_to_its_set_and_formats_canonically(spelling_and_members):
    spelling, members = spelling_and_members
    cpus = CpuSet.parse(spelling)
    assert set(cpus) == members
    assert is_canonical(cpus.format())


@given(spellings())
def test_the_canonical_form_is_the_only_canonical_spelling(spelling_and_members):
    spelling, _ = spelling_and_members
    assert is_canonical(spelling) == (CpuSet.parse(spelling).format() == spelling)


@given(cpu_sets(), cpu_sets())
def test_set_algebra_agrees_with_python_sets(a, b):
    left, right = CpuSet(a), CpuSet(b)
    assert set(left | right) == a | b
    assert set(left & right) == a & b
    assert set(left - right) == a - b
    assert left.issubset(right) == (a <= b)
    assert left.isdisjoint(right) == a.isdisjoint(b)
    assert (left == right) == (a == b)
    assert len(left) == len(a)
    assert bool(left) == bool(a)


@given(cpu_sets(), cpu_numbers)
def test_membership_agrees_with_python_sets(members, cpu):
    assert (cpu in CpuSet(members)) == (cpu in members)


@given(cpu_sets())
def test_equal_sets_hash_alike_however_spelled(members):
    cpus = CpuSet(members)
    reparsed = CpuSet.parse(cpus.format())
    assert hash(reparsed) == hash(cpus)
    assert len({cpus, reparsed}) == 1
