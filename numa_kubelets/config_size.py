"""The stack config's size as the Python language host passes it, against Linux's limit.

The language host hands the program the whole stack config (every namespace) in one environment
variable, `PULUMI_CONFIG=<JSON>`: Go's `json.Marshal` of a map of full keys (`numa-kubelets:hosts`)
to string values, an object's value being its own `json.Marshal` (pulumi-language-python
`constructConfig`; sdk/go/common/resource/config `Plaintext.marshalText`). Linux takes at most
MAX_ARG_STRLEN (32 pages, 131,072 bytes) for one environment string, its name, `=` and the
terminating NUL included; past it the program never starts (`fork/exec .../python: argument
list too long`, pulumi/pulumi#8680). This module says how close a stack is, before the engine
runs; host classes (`hostClasses`) are the way back under.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .problems import NAMESPACE

ENVIRONMENT_VARIABLE = "PULUMI_CONFIG"
MAX_ARG_STRLEN = 32 * 4096  # Linux: one argument or environment string, NUL included
WARN_FROM = 0.75
WAY_OUT = (
    "write the hosts' shared keys once as host classes (numa-kubelets:hostClasses and hosts[].class, "
    "docs/fleets.md#host-classes), or split the fleet into stacks"
)

# Go's encoding/json escapes these inside strings (HTML safety, and JavaScript line separators).
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def go_json(value: Any) -> str:
    """`json.Marshal` as Go writes it: compact, map keys sorted, `<`, `>` and `&` escaped."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    for character, escape in _GO_ESCAPES.items():
        text = text.replace(character, escape)
    return text


def pulumi_string(value: Any) -> str:
    """A config value as the engine hands it to the language host: a string as it is, a scalar
    in its JSON spelling, an object or a list as JSON."""
    return value if isinstance(value, str) else go_json(value)


def full_key(key: str) -> str:
    """A stack file's key without a namespace is the project's (`numa-kubelets`)."""
    return key if ":" in key else f"{NAMESPACE}:{key}"


def pulumi_config_bytes(config: Mapping[str, Any]) -> int:
    """The bytes `PULUMI_CONFIG=<JSON>` takes for a stack file's `config` mapping, NUL included.

    An encrypted value (`{secure: ...}`) counts at the length of its ciphertext, which is longer
    than the value the program receives: the figure is then an upper bound.
    """
    values = {full_key(str(key)): pulumi_string(_ciphertext_for_secrets(value)) for key, value in config.items()}
    return len(f"{ENVIRONMENT_VARIABLE}={go_json(values)}".encode()) + 1


def _ciphertext_for_secrets(value: Any) -> Any:
    if isinstance(value, Mapping):
        if set(value) == {"secure"}:
            return value["secure"]
        return {key: _ciphertext_for_secrets(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_ciphertext_for_secrets(inner) for inner in value]
    return value


@dataclass(frozen=True)
class ConfigSize:
    """How much of the limit a stack's config takes."""

    size: int
    limit: int = MAX_ARG_STRLEN

    @property
    def share(self) -> float:
        return self.size / self.limit

    @property
    def level(self) -> Literal["ok", "warning", "error"]:
        if self.size > self.limit:
            return "error"
        return "warning" if self.share >= WARN_FROM else "ok"

    def report(self) -> str:
        figure = (
            f"the stack config takes {self.size:,} bytes in {ENVIRONMENT_VARIABLE}, {self.share:.0%} of Linux's "
            f"{self.limit:,}-byte limit on one environment string (MAX_ARG_STRLEN)"
        )
        if self.level == "ok":
            return figure
        if self.level == "warning":
            return (
                f"warning: {figure}; the Python language host passes the whole stack config in that one variable, "
                f"and past the limit `pulumi preview` and `pulumi up` fail before the program runs; {WAY_OUT}"
            )
        return (
            f"error: {figure}, over it: the Python language host passes the whole stack config in that one "
            "variable, so `pulumi preview` and `pulumi up` would fail before the program runs "
            f"(`fork/exec .../python: argument list too long`); {WAY_OUT}"
        )


def stack_config_size(document: Any) -> ConfigSize:
    """The size of a parsed stack file's whole `config` (every namespace: the engine passes all)."""
    config = document.get("config") if isinstance(document, Mapping) else None
    return ConfigSize(pulumi_config_bytes(config if isinstance(config, Mapping) else {}))
