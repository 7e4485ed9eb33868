"""Which test host images a session builds beside its first tests (fixtures.testhost_image): the
suites of the standalone machines its collected tests boot, read from their fixture's parameter;
and when: once the kubelet is built, while tools/build.sh runs beside the tests."""

import threading
from types import SimpleNamespace

import pytest

from tests import realtools
from tests.testhost import fixtures
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


@pytest.fixture
def images_built(tmp_path, monkeypatch) -> list[str]:
    """The suites build_images asks ensure_image for (the image build itself is the testhost tier's),
    with tools/build.sh running beside the tests, its ready list in tmp_path."""
    monkeypatch.setenv("NUMA_KUBELETS_TOOLS_BUILDING", "1")
    monkeypatch.setattr(realtools, "READY_LIST", tmp_path / "ready")
    monkeypatch.setattr(realtools, "BUILD_EXIT", tmp_path / "build.exit")
    asked: list[str] = []
    monkeypatch.setattr(fixtures, "ensure_image", lambda suite: asked.append(suite))
    return asked


def test_the_other_images_wait_for_the_kubelet_while_the_build_runs(images_built):
    realtools.READY_LIST.write_text("pulumi\n")
    builder = threading.Thread(target=fixtures.build_images, args=(["trixie", "forky"], threading.Event()))
    builder.start()
    builder.join(timeout=3)
    assert builder.is_alive() and images_built == [], "an image was built before the kubelet"
    realtools.READY_LIST.write_text("pulumi\nkubelet\n")
    builder.join(timeout=10)
    assert not builder.is_alive() and images_built == ["trixie", "forky"]


def test_a_session_over_before_the_kubelet_builds_no_image(images_built):
    session_over = threading.Event()
    builder = threading.Thread(target=fixtures.build_images, args=(["trixie"], session_over))
    builder.start()
    session_over.set()
    builder.join(timeout=10)
    assert not builder.is_alive() and images_built == []


def test_without_the_build_beside_the_tests_the_images_are_built_at_once(images_built, monkeypatch):
    monkeypatch.delenv("NUMA_KUBELETS_TOOLS_BUILDING")
    fixtures.build_images(["trixie"], threading.Event())
    assert images_built == ["trixie"]
