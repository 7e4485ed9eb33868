"""tools/prerequisites.sh, the check `make demo`, `make test` and .ci/run start with, run for real.

The script runs unchanged; what changes between the cases is the machine it sees:
- a PATH that lacks one tool: a directory of links to every program of /usr/bin and /bin but
  socat. That is what a machine without the socat package looks like to the script, which finds
  a package by its command (or file), not by asking dpkg, so that it holds on any system;
- an unprivileged user (nobody, through setpriv), as a developer without sudo runs it;
- a small file system (a 64 MiB tmpfs in a mount namespace of the test's own) for the disk check.
Only apt-get is a stand-in, in the root cases: the real one would change this machine's packages.
It records what it was asked and "installs" by linking the command back into the PATH above. The
real apt-get path is .ci/run's on every fresh CI machine, through this same script. Nothing here
installs, removes or mounts anything outside the test's own directories and namespaces.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.testhost.tools import DEBIAN_PACKAGE_OF

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "prerequisites.sh"
# Everything the script reads of the repository, for copies of it that nobody can read or that
# live on a small file system.
FILES_IT_READS = (SCRIPT, REPO / "pyproject.toml", *sorted((REPO / "tools").glob("*/go.mod")))
NOBODY = "65534"
# "Within seconds": generous for a busy CI machine; the check itself takes well under one.
SECONDS_ALLOWED = 10


def go_version_wanted() -> str:
    """The newest `go` line of the tools' wrapper modules, read here independently of the script."""
    versions = [
        re.search(r"^go (\S+)$", path.read_text(), re.MULTILINE).group(1)  # type: ignore[union-attr]
        for path in FILES_IT_READS
        if path.name == "go.mod"
    ]
    return max(versions, key=lambda version: tuple(int(part) for part in version.split(".")))


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the unprivileged user can read (pytest's own tmp_path is root's alone)."""
    directory = Path(tempfile.mkdtemp(prefix="numa-kubelets-prerequisites-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


def copy_of_repo(destination: Path) -> Path:
    """The script and what it reads, world-readable under `destination`; returns the script."""
    for source in FILES_IT_READS:
        target = destination / source.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    for path in destination.rglob("*"):
        path.chmod(0o755 if path.is_dir() or path == destination / "tools/prerequisites.sh" else 0o644)
    return destination / "tools" / "prerequisites.sh"


def path_without(directory: Path, *hidden: str) -> Path:
    """A PATH directory with every program of /usr/bin and /bin but `hidden`."""
    directory.mkdir()
    for source in (Path("/usr/bin"), Path("/bin")):
        for program in source.iterdir():
            link = directory / program.name
            if program.name not in hidden and not link.is_symlink():
                link.symlink_to(program)
    return directory


def stand_in_apt_get(directory: Path, log: Path, installs_into: Path | None) -> None:
    """An apt-get that records its arguments in `log`; given `installs_into`, its `install`
    links each package's command there (package and command have the same name in these
    tests: socat), as the real one would put it on PATH."""
    directory.mkdir()
    script = directory / "apt-get"
    install = f'for package; do ln -sf "/usr/bin/$package" "{installs_into}/$package"; done\n' if installs_into else ""
    script.write_text(
        f'#!/bin/sh\necho "$*" >>"{log}"\n[ "$1" = install ] || exit 0\nshift 4  # install -y -qq --no-install-recommends\n'
        + install
    )
    script.chmod(0o755)


def run(script: Path, *checks: str, path: str, user: str | None = None):
    """The script with a clean environment (PATH, HOME, the locale); as `user` if given."""
    env = [
        "env",
        "-i",
        f"PATH={path}",
        "HOME=/nonexistent",
        "LC_ALL=C.UTF-8",
    ]
    as_user = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user else []
    started = time.monotonic()
    result = subprocess.run(
        [*as_user, *env, "/bin/bash", str(script), *checks], capture_output=True, text=True, timeout=60, check=False
    )
    return result, time.monotonic() - started


def test_everything_is_there_on_a_machine_set_up_as_ci_sets_it_up():
    """.ci/run ran the install before the tests: the same script now finds all it installs."""
    result = subprocess.run(
        ["bash", str(SCRIPT), "packages", "python", "go"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("prerequisites: all there (")
    assert result.stderr == ""


def test_without_root_a_missing_package_is_named_with_the_command_that_installs_it(shared_dir):
    script = copy_of_repo(shared_dir / "repo")
    path = path_without(shared_dir / "bin", "socat")
    user = NOBODY if os.geteuid() == 0 else None  # already unprivileged otherwise
    result, seconds = run(script, "packages", "python", "go", path=str(path), user=user)
    assert result.returncode == 1, result
    assert seconds < SECONDS_ALLOWED
    assert "prerequisites: missing Debian packages socat\n" in result.stderr
    assert "apt-get update && apt-get install -y --no-install-recommends socat'" in result.stderr
    assert result.stdout == ""


def test_without_python_both_of_its_packages_are_named(shared_dir):
    script = copy_of_repo(shared_dir / "repo")
    path = path_without(shared_dir / "bin", *(program.name for program in Path("/usr/bin").glob("python3*")))
    user = NOBODY if os.geteuid() == 0 else None
    result, _ = run(script, "packages", "python", path=str(path), user=user)
    assert result.returncode == 1
    assert "prerequisites: missing Debian packages python3 python3-venv\n" in result.stderr


def test_without_apt_get_the_commands_to_provide_are_named(shared_dir):
    """Another distribution: the Debian names would not help, the commands do."""
    path = path_without(shared_dir / "bin", "socat", "apt-get")
    result, _ = run(SCRIPT, "packages", path=str(path))
    assert result.returncode == 1
    assert "no apt-get here: install what provides socat with this system's package manager" in result.stderr


def test_as_root_the_missing_package_is_installed_with_one_update(shared_dir):
    assert os.geteuid() == 0, "the install path is root's (CI runs as root)"
    path = path_without(shared_dir / "bin", "socat")
    log = shared_dir / "apt-get.log"
    stand_in_apt_get(shared_dir / "apt", log, installs_into=path)
    result, _ = run(SCRIPT, "packages", "python", "go", path=f"{shared_dir / 'apt'}:{path}")
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == ["update -qq", "install -y -qq --no-install-recommends socat"]
    assert "prerequisites: installed socat\n" in result.stdout


def test_as_root_a_package_that_does_not_show_after_the_install_fails(shared_dir):
    path = path_without(shared_dir / "bin", "socat")
    stand_in_apt_get(shared_dir / "apt", shared_dir / "apt-get.log", installs_into=None)
    result, _ = run(SCRIPT, "packages", path=f"{shared_dir / 'apt'}:{path}")
    assert result.returncode == 1
    assert "apt-get installed socat, but these still do not show: socat (socat)" in result.stderr


def test_as_root_everything_there_means_no_apt_get_at_all(shared_dir):
    log = shared_dir / "apt-get.log"
    stand_in_apt_get(shared_dir / "apt", log, installs_into=None)
    result, _ = run(SCRIPT, "packages", "python", "go", path=f"{shared_dir / 'apt'}:{os.environ['PATH']}")
    assert result.returncode == 0, result.stderr
    assert not log.exists()


def test_an_old_go_stops_the_run_before_any_install(shared_dir):
    """The one stand-in for Go: this machine has one Go, and an old one cannot be installed here."""
    path = path_without(shared_dir / "bin", "socat", "go")
    old_go = shared_dir / "old-go"
    old_go.mkdir()
    (old_go / "go").write_text('#!/bin/sh\n[ "$*" = "env GOVERSION" ] && echo go1.20.1\n')
    (old_go / "go").chmod(0o755)
    log = shared_dir / "apt-get.log"
    stand_in_apt_get(shared_dir / "apt", log, installs_into=path)
    result, seconds = run(SCRIPT, path=f"{old_go}:{shared_dir / 'apt'}:{path}")
    assert result.returncode == 1
    assert seconds < SECONDS_ALLOWED
    assert f"{old_go}/go is Go 1.20.1; tools/*/go.mod need Go {go_version_wanted()} or newer" in result.stderr
    # What else is missing is said too, for one round of fixing; but nothing was installed.
    assert "also missing Debian packages socat: apt-get update && apt-get install" in result.stderr
    assert not log.exists()


def run_on_small_file_system(shared_dir: Path, prepare: str, tmpdir: str) -> subprocess.CompletedProcess[str]:
    """The disk check of a copy of the repository on a 64 MiB tmpfs mounted in a mount namespace of
    its own, with Go's caches there too; `prepare` runs in it first (as sh, $repo set)."""
    assert os.geteuid() == 0, "mounting the tmpfs takes root (CI runs as root)"
    staged = shared_dir / "staged"
    copy_of_repo(staged)
    small = shared_dir / "small"
    small.mkdir()
    inner = (
        'set -e; mount -t tmpfs -o size=64m numa-kubelets-test "$1"; cp -a "$2/." "$1/"; repo=$1\n'
        f"{prepare}\n"
        'exec env -i PATH="$PATH" HOME=/nonexistent GOMODCACHE="$1/go/pkg/mod" GOCACHE="$1/go-build" '
        'TMPDIR="$3" bash "$1/tools/prerequisites.sh" disk'
    )
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner, "sh", str(small), str(staged), tmpdir],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_too_little_disk_is_named_with_what_needs_it(shared_dir):
    small = shared_dir / "small"
    result = run_on_small_file_system(shared_dir, prepare=":", tmpdir=str(small / "tmp"))
    assert result.returncode == 1
    message = re.search(
        r"too little free disk: (\S+) has (\d+) MiB free, this needs (\d+) MiB more \((.*)\)", result.stderr
    )
    assert message, result.stderr
    mount, free, needed, parts = message.groups()
    assert mount == str(small) and int(free) <= 64 and int(needed) > 10 * 1024
    assert [part.rsplit(" ", 2)[0] for part in parts.split(", ")] == [
        ".tools",
        ".venv",
        "Go build cache",
        "Go modules",
        "running test hosts",
        "test host images",
    ]


def test_a_machine_that_built_everything_needs_no_more_room_for_it(shared_dir):
    """Every part's done marker present (Go's module cache, .tools/bin, an image per suite, .venv):
    nothing more is counted on that file system, the running hosts' room goes to TMPDIR's."""
    markers = " ".join(
        [
            '"$1/go/pkg/mod/cache/download/k8s.io/kubernetes/@v/$(version kubernetes k8s.io/kubernetes).zip"',
            '"$1/go/pkg/mod/cache/download/k8s.io/kubernetes/@v/$(version kubelet-previous k8s.io/kubernetes).zip"',
            '"$1/go/pkg/mod/cache/download/go.etcd.io/etcd/server/v3/@v/$(version etcd go.etcd.io/etcd/server/v3).zip"',
            '"$1/go/pkg/mod/cache/download/github.com/pulumi/pulumi/pkg/v3/@v/'
            '$(version pulumi github.com/pulumi/pulumi/pkg/v3).zip"',
            '"$1/go/pkg/mod/cache/download/github.com/pulumi/pulumi-kubernetes/provider/v4/@v/'
            '$(version pulumi-kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4).zip"',
            *(
                f'"$1/.tools/bin/{name}"'
                for name in (
                    "kubelet",
                    "kubernetes",
                    "kubelet-previous",
                    "etcd",
                    "pulumi",
                    "pulumi-resource-kubernetes",
                )
            ),
            '"$1/.testhost/images/bookworm-0123/manifest.json"',
            '"$1/.testhost/images/trixie-4567/manifest.json"',
            '"$1/.venv/bin/python"',
        ]
    )
    prepare = (
        # version DIR MODULE: the version tools/DIR/go.mod requires (`require M v` or a block's `\tM v`).
        'version() { awk -v m="$2" \'($1 == m) { print $2; exit } ($1 == "require" && $2 == m) { print $3; exit }\' '
        '"$repo/tools/$1/go.mod"; }\n'
        f'for marker in {markers}; do mkdir -p "$(dirname "$marker")"; : >"$marker"; done'
    )
    result = run_on_small_file_system(shared_dir, prepare=prepare, tmpdir=str(shared_dir))
    assert result.returncode == 0, result.stderr
    assert "all there (" in result.stdout
    assert str(shared_dir / "small") not in result.stdout  # nothing more counted there


def test_one_list_of_packages_which_ci_installs_through_the_script():
    ci = (REPO / ".ci" / "run").read_text()
    assert "apt-get install" not in ci
    assert "bash tools/prerequisites.sh packages python\n" in ci
    listed = subprocess.run(["bash", str(SCRIPT), "--list-packages"], capture_output=True, text=True, check=True)
    packages = listed.stdout.split()
    assert len(packages) == len(set(packages))
    # The test host's own messages name packages of that list.
    assert set(DEBIAN_PACKAGE_OF.values()) <= set(packages)


@pytest.mark.parametrize("target", ["demo", "test", "testhost"])
def test_make_checks_the_prerequisites_before_anything_else(target):
    """`make -n -B`: the commands make would run, in order, the venv's too; nothing runs. As a
    user types it: under `make test` the tests inherit MAKELEVEL and MAKEFLAGS, and a make that
    believes it is a sub-make prints "Entering directory" first."""
    env = {key: value for key, value in os.environ.items() if key not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    result = subprocess.run(["make", "-n", "-B", target], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[0] == "bash tools/prerequisites.sh"
    assert result.stdout.count("tools/prerequisites.sh") == 1
