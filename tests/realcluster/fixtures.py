"""The session's real control plane, as a pytest fixture (registered in tests/conftest.py, so
every tier shares one). Started on first use (a few seconds), stopped at the end of the session.
Missing binaries or a component that does not come up fail the test, naming the component and
showing its log: the tier never skips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realcluster.controlplane import ControlPlane


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"))
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
