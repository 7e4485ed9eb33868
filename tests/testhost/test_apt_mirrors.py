"""The test host image is bootstrapped from the archives this machine's apt uses."""

import pytest

from tests.testhost import recipe

DEB822 = """Types: deb
# a comment: http://example.invalid/debian
URIs: http://mirror.test/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.test/debian-security/
Suites: bookworm-security
Components: main
"""


def test_deb822_sources_give_both_archives():
    assert recipe.debian_mirrors([DEB822], {}) == ("http://mirror.test/debian", "http://mirror.test/debian-security")


def test_one_line_sources_are_read_too():
    text = "deb [signed-by=/k.gpg] http://a.test/debian bookworm main\ndeb http://b.test/debian-security bookworm-security main\n"
    assert recipe.debian_mirrors([text], {}) == ("http://a.test/debian", "http://b.test/debian-security")


def test_the_environment_overrides_the_machine():
    environ = {recipe.MIRROR_ENV: "http://local.test/debian", recipe.SECURITY_MIRROR_ENV: "http://local.test/sec"}
    assert recipe.debian_mirrors([DEB822], environ) == ("http://local.test/debian", "http://local.test/sec")


def test_no_archive_fails_naming_what_to_set():
    with pytest.raises(recipe.NoDebianMirror) as failure:
        recipe.debian_mirrors(["URIs: http://mirror.test/debian\n"], {})
    assert recipe.SECURITY_MIRROR_ENV in str(failure.value)
    assert recipe.MIRROR_ENV not in str(failure.value)


def test_this_machine_has_both():
    main, security = recipe.machine_debian_mirrors()
    assert main.endswith("/debian") and security.endswith("/debian-security")
