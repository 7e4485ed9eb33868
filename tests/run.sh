#!/usr/bin/env bash
# Every test tier, the real-host tier included (what `make test` and CI run), while the real
# programs build: tools/build.sh runs in the background in a session of its own
# (tools/build-in-background.sh: where the kernel groups CPU time by session it gets as much as
# this session and as each emulated machine). The emulated machines' scenarios run first, in the
# order the build finishes the families they need, each waiting for the programs it asks for
# (tests/realtools.py); every other test after them (tests/conftest.py says why). Every real-host
# scenario runs the real kubelet through the Pulumi engine, which the build makes first (both
# about 12 minutes on a fresh machine); the whole build takes about 23 minutes alone, and far
# longer beside the emulated hosts. On a machine that built before, seconds.
#
#   tests/run.sh                 every tier
#   tests/run.sh -x -k cluster   pytest arguments
set -uo pipefail
cd "$(dirname "$0")/.." || exit
python=${PYTHON:-.venv/bin/python}
started=$SECONDS

# Already started by .ci/run, or started here; stopped with the tests if they fail or are interrupted.
bash tools/build-in-background.sh || exit
build_group=$(cat .tools/build.pid)
trap 'kill -- -"$build_group" 2>/dev/null' EXIT

# Two pytest-xdist workers (NUMA_KUBELETS_TEST_WORKERS=0: one process). tests/conftest.py says
# what goes where: each emulated machine's modules in one worker, in order, the origin machine in
# one and the interleaved machine beside it in the other; every other module to whichever is free.
workers=${NUMA_KUBELETS_TEST_WORKERS:-2}
# A worker that dies fails the run at once: xdist's replacement of it can wait for good (seen: the
# replacement held its module's last test, which xdist sends only with more work or a shutdown).
parallel=(-n "$workers" --max-worker-restart 0)
[ "$workers" != 0 ] || parallel=()
tests_rc=0
NUMA_KUBELETS_TOOLS_BUILDING=1 "$python" -m pytest "${parallel[@]}" "$@" || tests_rc=$?
if [ "$tests_rc" -ne 0 ]; then
  echo "== tests failed (exit $tests_rc) after $((SECONDS - started)) s; tools/build.sh stopped. Its log so far:"
  tail -n 30 .tools/build.log
  exit "$tests_rc"
fi

# Not a child of this shell when .ci/run started it: its exit file says when it is done.
until [ -s .tools/build.exit ]; do sleep 2; done
trap - EXIT
cat .tools/build.log
read -r build_rc build_seconds <.tools/build.exit
echo "== tools/build.sh: exit $build_rc in $build_seconds s, beside the tests; all: $((SECONDS - started)) s"
[ "$build_rc" -eq 0 ]
