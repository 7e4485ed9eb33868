"""Conformance of RandomString and RandomPassword (pulumi-random 4.21.4) under the real engine.

Like tests/e2e/test_command_plugin.py: the built CLI (offline) drives whichever pulumi-random
4.21.4 the plugin cache holds, the double of tools/plugin-doubles or, with
NUMA_KUBELETS_PULUMI_HOME, the real plugin. The program makes its bootstrap token from one of
each (components/cluster.py: lowercase letters and digits); it relies on the result staying
the same from one update to the next, on the password staying secret, and on `keepers` (like
every other argument) replacing the resource with a new value.
"""

from __future__ import annotations

import re
import string
from importlib.metadata import version
from typing import Any

import bcrypt
import pulumi
import pulumi_random as random
import pytest
from pulumi import automation as auto

from tests import realtools
from tests.e2e.test_command_plugin import NewStack, engine, exported, is_secret, rerun, states_of  # noqa: F401  (engine: a fixture)
from tests.e2e.test_pulumi_cli import offline_env  # noqa: F401  (the fixture engine needs)

pytestmark = pytest.mark.realtools("pulumi")  # the CLI and the plugins tools/build.sh installs with it

DEFAULT_SPECIAL = "!@#$%&*()-_=+[]{}<>:?"
LOWER_AND_DIGITS = re.compile(rf"[{string.ascii_lowercase}{string.digits}]+")


@pytest.fixture(autouse=True)
def random_plugin() -> None:
    pulumi_random = realtools.pins()["pulumi-random"]
    realtools.require_plugin("random", pulumi_random)
    assert version("pulumi_random") == pulumi_random  # the SDK asks the engine for exactly that plugin


def strings(**arguments: dict[str, Any]) -> auto.PulumiFn:
    """A program of one RandomString per name, exporting each result."""

    def run() -> None:
        for name, args in arguments.items():
            pulumi.export(name, random.RandomString(name, **args).result)

    return run


def results(up: auto.UpResult) -> dict[str, str]:
    return {name: output.value for name, output in up.outputs.items()}


def test_length_and_character_classes(engine: NewStack) -> None:  # noqa: F811
    stack = engine(
        strings(
            defaults={"length": 64},
            # The program's bootstrap token id (components/cluster.py).
            token_id={"length": 6, "upper": False, "special": False},
            minimums={"length": 12, "min_upper": 3, "min_numeric": 4, "special": False},
            own_specials={"length": 20, "override_special": "_.", "upper": False, "lower": False, "numeric": False},
            without_number={"length": 40, "number": False},
        )
    )
    made = results(stack.up())
    assert {name: len(result) for name, result in made.items()} == {
        "defaults": 64,
        "token_id": 6,
        "minimums": 12,
        "own_specials": 20,
        "without_number": 40,
    }
    assert set(made["defaults"]) <= set(string.ascii_letters + string.digits + DEFAULT_SPECIAL)
    assert LOWER_AND_DIGITS.fullmatch(made["token_id"])
    assert sum(c.isupper() for c in made["minimums"]) >= 3 and sum(c.isdigit() for c in made["minimums"]) >= 4
    assert set(made["minimums"]) <= set(string.ascii_letters + string.digits)
    assert set(made["own_specials"]) <= set("_.")
    assert not any(c.isdigit() for c in made["without_number"])
    # The state records every argument with its default; `number` is `numeric`'s old name.
    state = {r["urn"].rsplit("::", 1)[1]: r for r in states_of(stack, "random:index/randomString:RandomString")}
    defaults = {key: state["defaults"]["outputs"][key] for key in ("upper", "lower", "numeric", "number", "special")}
    assert defaults == dict.fromkeys(defaults, True)
    mins = ("minUpper", "minLower", "minNumeric", "minSpecial")
    assert {key: state["defaults"]["outputs"][key] for key in mins} == dict.fromkeys(mins, 0)
    assert (state["without_number"]["outputs"]["numeric"], state["without_number"]["outputs"]["number"]) == (
        False,
        False,
    )
    # A RandomString's id is its result, which is not secret.
    assert state["token_id"]["id"] == made["token_id"] == state["token_id"]["outputs"]["result"]


def test_the_password_is_secret_with_its_bcrypt_hash(engine: NewStack) -> None:  # noqa: F811
    def program() -> None:
        # The program's bootstrap token secret (components/cluster.py).
        password = random.RandomPassword("token-secret", length=16, upper=False, special=False)
        pulumi.export("password", password.result)
        pulumi.export("hash", password.bcrypt_hash)

    stack = engine(program)
    up = stack.up()
    password, hash_ = up.outputs["password"], up.outputs["hash"]
    assert password.secret and hash_.secret
    assert LOWER_AND_DIGITS.fullmatch(password.value) and len(password.value) == 16
    assert bcrypt.checkpw(password.value.encode(), hash_.value.encode())
    (state,) = states_of(stack, "random:index/randomPassword:RandomPassword")
    assert is_secret(state["outputs"]["result"]) and is_secret(state["outputs"]["bcryptHash"])
    assert state["id"] == "none"
    assert password.value not in str(exported(stack))


def test_the_result_stays_across_updates(engine: NewStack) -> None:  # noqa: F811
    def program(extra: bool) -> auto.PulumiFn:
        def run() -> None:
            pulumi.export("string", random.RandomString("string", length=32).result)
            pulumi.export("password", random.RandomPassword("password", length=32).result)
            if extra:  # an unrelated change of the stack
                pulumi.export("other", random.RandomString("other", length=8).result)

        return run

    stack = engine(program(False))
    first = results(stack.up())
    up = rerun(stack, program(True))
    assert up.summary.resource_changes == {"same": 3, "create": 1}
    assert {name: up.outputs[name].value for name in first} == first
    again = rerun(stack, program(True))
    assert again.summary.resource_changes == {"same": 4}
    assert {name: again.outputs[name].value for name in first} == first


@pytest.mark.parametrize(
    ("before", "after"),
    [({"keepers": {"host": "a"}}, {"keepers": {"host": "b"}}), ({"length": 32}, {"length": 33})],
    ids=["keepers", "length"],
)
def test_a_changed_argument_replaces_with_a_new_result(
    engine: NewStack,  # noqa: F811
    before: dict[str, Any],
    after: dict[str, Any],
) -> None:
    def program(arguments: dict[str, Any]) -> auto.PulumiFn:
        def run() -> None:
            arguments_with_length = {"length": 32, **arguments}
            pulumi.export("string", random.RandomString("string", **arguments_with_length).result)
            pulumi.export("password", random.RandomPassword("password", **arguments_with_length).result)

        return run

    stack = engine(program(before))
    first = results(stack.up())
    up = rerun(stack, program(after))
    assert up.summary.resource_changes == {"replace": 2, "same": 1}
    assert all(up.outputs[name].value != first[name] for name in first)
