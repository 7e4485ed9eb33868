"""The session's real control plane, as a pytest fixture (registered in tests/conftest.py, so
every tier shares one). Started on first use (a few seconds), stopped at the end of the session; the guests the session
boots reach it at 10.0.2.100:6443 from then on.
Missing binaries or a component that does not come up fail the test, naming the component and
showing its log: the tier never skips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realcluster.controlplane import ControlPlane
from tests.testhost.fixtures import session_api_port_file


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"))
    plane.start()
    # From now on the session's guests reach the API server (tests/testhost/qemu.py).
    port_file = session_api_port_file(tmp_path_factory)
    port_file.with_name(f".{port_file.name}").write_text(f"{plane.port}\n")
    port_file.with_name(f".{port_file.name}").replace(port_file)
    try:
        yield plane
    finally:
        plane.stop()
