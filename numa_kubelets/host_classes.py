"""Host classes (`hostClasses`, `hosts[].class`): named host templates, written out into hosts.

A host with `class` is exactly the host written out with the class's keys (DESIGN.md section 3,
fifth turn): the class gives every key the host does not set itself, except `kubeletConfig`,
which the host's own deep-merges over (stack < class < host < kubelet). The expansion works on
the raw values, before validation, so that everything after it (validation, plan, resources,
names) sees the hosts written out and nothing else: moving a stack to classes changes nothing.

What it keeps is where each written-out key came from, so that a problem found in a host lands
on the path the user wrote: `hostClasses.<class>.<key>...` for a key the host took from its
class, with the host's path added where the problem exists only for some hosts of the class.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .kubelet_config import deep_merge
from .problems import MISSING_KEY, Problem

# Each host's own: a class that sets them would give every host of the class the same one.
HOST_OWN_KEYS = ("name", "address", "hostKey")
CLASS_KEY = "class"
LAYERED_KEY = "kubeletConfig"  # deep-merged, class below host, rather than replaced

# A problem's path, and a path named inside a message (which ends where the sentence goes on).
_PROBLEM_PATH = re.compile(r"hosts\[(\d+)\]((?:\.[A-Za-z][A-Za-z0-9]*)?)(.*)", re.DOTALL)
_PATH_IN_MESSAGE = re.compile(r"hosts\[\d+\](?:\[\d+\]|\.[A-Za-z0-9_-]+)*")


@dataclass(frozen=True)
class ClassUse:
    """One host written with `class`: the class's raw keys and the host's own (without `class`)."""

    class_name: str
    template: Mapping[str, Any]
    own: Mapping[str, Any]

    def taken_from_class(self, key: str, rest: str) -> bool:
        """Whether the value at `<key><rest>` of the written-out host is the class's."""
        if key not in self.template:
            return False
        if key not in self.own:
            return True
        if key != LAYERED_KEY:
            return False
        return _deep_from_template(self.template[key], self.own[key], rest)


def _deep_from_template(template: Any, own: Any, rest: str) -> bool:
    """Within a deep merge of `own` over `template`: whether `rest` (".a.b") ends in the template's."""
    segments = rest.split(".")[1:] if rest.startswith(".") else []
    for index, segment in enumerate(segments):
        if not (isinstance(template, Mapping) and isinstance(own, Mapping)):
            return False
        # A map key may hold dots (evictionHard's `memory.available`): the rest of the path, whole.
        whole = ".".join(segments[index:])
        for key in (segment, whole):
            if key in own or key in template:
                break
        else:
            return False
        if key not in own:
            return key in template
        if key not in template:
            return False
        template, own = template[key], own[key]
    return False


@dataclass(frozen=True)
class Expansion:
    """The hosts written out, the classes to validate, and where each host's keys came from."""

    hosts: Any  # the raw `hosts` with every class written out (as given when it is not a list)
    classes: Any  # the raw `hostClasses` without the keys a class may not set (reported instead)
    problems: tuple[Problem, ...] = ()
    uses: Mapping[int, ClassUse] = field(default_factory=dict)
    unresolved: frozenset[int] = frozenset()  # hosts whose class is unknown: their missing keys follow from it

    def hosts_of_class(self, class_name: str) -> list[int]:
        return [index for index, use in self.uses.items() if use.class_name == class_name]

    def user_path(self, path: str) -> tuple[str, int | None]:
        """The path as the user wrote it, and the host it was found in when that is a class's key."""
        match = _PROBLEM_PATH.fullmatch(path)
        if match is None:
            return path, None
        index = int(match.group(1))
        use = self.uses.get(index)
        key = match.group(2)[1:]
        if use is None or not key or not use.taken_from_class(key, match.group(3)):
            return path, None
        return f"hostClasses.{use.class_name}.{key}{match.group(3)}", index

    def _user_message(self, message: str) -> str:
        """Paths named inside a message (`already used by hosts[0].kubelets[1]`), as written."""

        def written(match: re.Match[str]) -> str:
            path, index = self.user_path(match.group(0))
            return path if index is None else f"{path} of hosts[{index}]"

        return _PATH_IN_MESSAGE.sub(written, message)

    def _with_class_named(self, path: str, message: str) -> str:
        """A key a host must have that neither it nor its class sets: say both were looked at."""
        match = _PROBLEM_PATH.fullmatch(path)
        if message != MISSING_KEY or match is None or match.group(3) or int(match.group(1)) not in self.uses:
            return message
        return f"{message}: neither the host nor its class {self.uses[int(match.group(1))].class_name} sets it"

    def user_problems(self, problems: Iterable[Problem], class_problems: Collection[Problem] = ()) -> list[Problem]:
        """Each problem at the path the user wrote.

        A problem in a key a host took from its class is the class's when the class shows it on
        its own (`class_problems`) or every host of the class (two or more) shows it alike; else
        it exists only for some hosts (a clash with a host's own key) and names the host too.
        """
        own_problems: list[Problem] = []
        in_classes: dict[Problem, set[int]] = {}
        for problem in problems:
            path, index = self.user_path(problem.path)
            if problem.message == MISSING_KEY and _host_index(problem.path) in self.unresolved:
                continue
            message = self._user_message(problem.message)
            if index is None:
                own_problems.append(Problem(path, self._with_class_named(path, message)))
            else:
                in_classes.setdefault(Problem(path, message), set()).add(index)
        class_wide = set(class_problems)
        result = own_problems
        for problem, indexes in in_classes.items():
            class_name = self.uses[min(indexes)].class_name
            users = self.hosts_of_class(class_name)
            if problem in class_wide or (len(users) > 1 and indexes == set(users)):
                result.append(problem)
            else:
                result.extend(Problem(f"{problem.path} (for hosts[{index}])", problem.message) for index in indexes)
        return result


def expand_host_classes(hosts: Any, classes: Any) -> Expansion:
    """Write out every host that names a class. Malformed input is left for the models to report
    (a `hosts` that is no list, a class that is no mapping); what only classes can get wrong is
    reported here: an unknown class, and keys a class may not set."""
    problems: list[Problem] = []
    templates: dict[str, dict[str, Any]] = {}
    cleaned_classes = classes
    if isinstance(classes, Mapping):
        cleaned_classes = {}
        for name, template in classes.items():
            if not isinstance(template, Mapping):
                cleaned_classes[name] = template
                continue
            for key in template:
                if key in HOST_OWN_KEYS:
                    problems.append(
                        Problem(f"hostClasses.{name}.{key}", "each host's own: set it on the hosts, not in a class")
                    )
                elif key == CLASS_KEY:
                    problems.append(Problem(f"hostClasses.{name}.{key}", "a class cannot take another class"))
            cleaned = {k: v for k, v in template.items() if k not in HOST_OWN_KEYS and k != CLASS_KEY}
            cleaned_classes[name] = cleaned
            templates[str(name)] = cleaned
    if not isinstance(hosts, list):
        return Expansion(hosts, cleaned_classes, tuple(problems))
    written_out: list[Any] = []
    uses: dict[int, ClassUse] = {}
    unresolved: set[int] = set()
    for index, host in enumerate(hosts):
        if not isinstance(host, Mapping) or CLASS_KEY not in host:
            written_out.append(host)
            continue
        class_name = host[CLASS_KEY]
        if not isinstance(class_name, str) or class_name not in templates:
            problems.append(Problem(f"hosts[{index}].class", _unknown_class(class_name, templates)))
            unresolved.add(index)
            written_out.append({k: v for k, v in host.items() if k != CLASS_KEY})
            continue
        own = {k: v for k, v in host.items() if k != CLASS_KEY}
        template = templates[class_name]
        uses[index] = ClassUse(class_name, template, own)
        written_out.append({CLASS_KEY: class_name, **write_out(template, own)})
    return Expansion(written_out, cleaned_classes, tuple(problems), uses, frozenset(unresolved))


def _host_index(path: str) -> int | None:
    match = _PROBLEM_PATH.fullmatch(path)
    return int(match.group(1)) if match else None


def write_out(template: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """A host's own keys over its class's: each replaces the class's whole, except kubeletConfig
    (both mappings: deep-merged, the host's over the class's, as the kubelet layers merge)."""
    host = {**template, **own}
    if isinstance(template.get(LAYERED_KEY), dict) and isinstance(own.get(LAYERED_KEY), dict):
        host[LAYERED_KEY] = deep_merge(template[LAYERED_KEY], own[LAYERED_KEY])
    return host


def _unknown_class(name: Any, templates: Mapping[str, Any]) -> str:
    shown = f'"{name}"' if isinstance(name, str) else repr(name)
    if not templates:
        return f"unknown class {shown}; the stack defines no hostClasses"
    return f"unknown class {shown}; classes are: {', '.join(sorted(templates))}"
