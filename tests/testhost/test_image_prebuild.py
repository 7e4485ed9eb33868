"""Which test host images a session builds beside its first tests (fixtures.testhost_image): the
suites of the standalone machines its collected tests boot, read from their fixture's parameter."""

from types import SimpleNamespace

from tests.testhost.fixtures import STANDALONE_MACHINE_FIXTURE, suites_booted_later


def item(**params: str) -> SimpleNamespace:
    return SimpleNamespace(callspec=SimpleNamespace(params=params))


def test_the_suites_are_the_standalone_machines_parameters():
    items = [
        item(**{STANDALONE_MACHINE_FIXTURE: "trixie"}),
        item(**{STANDALONE_MACHINE_FIXTURE: "trixie"}),
        item(variant="trixie"),  # another fixture's parameter names no machine
        SimpleNamespace(),  # a test without parameters
    ]
    assert suites_booted_later(items) == {"trixie"}


def test_a_session_without_standalone_machines_builds_no_other_image():
    assert suites_booted_later([item(variant="bookworm"), SimpleNamespace()]) == set()
