#!/usr/bin/env bash
# Every test tier, the real-host tier included (what `make test` and CI run), while the real
# programs build: tools/build.sh runs in the background at the lowest CPU priority
# (tools/build-in-background.sh: the emulated hosts keep their pace; the build takes the CPU
# time the tests leave idle). The tests that need no built program run first; those marked
# `realtools(family)` follow in the order the build finishes the families, each waiting for
# the programs it asks for (tests/realtools.py). Every real-host scenario runs the real kubelet,
# which the build makes first (about 9 minutes on a fresh machine); the whole build takes about
# 35 minutes alone, and far longer beside the emulated hosts. On a machine that built before,
# seconds.
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

# Two workers (tests/conftest.py says what goes where: the origin machine's scenarios in one, in
# order, every other module in the other) where the build has little left to do: they keep both
# cores busy with tests. On a fresh machine the build needs both cores for half an hour, and its
# last programs gate the last scenarios: two workers there starve it (measured: with a 37-minute
# head start it still held back the real-cluster scenarios), so the tests run in one process as
# before and the build takes what they leave. A build that has made the kubelet within two
# minutes (seconds when Go's caches are warm; over six minutes cold) decides: warm.
# NUMA_KUBELETS_TEST_WORKERS sets the count (0: one process).
warm_within=${NUMA_KUBELETS_WARM_BUILD_SECONDS:-120}
waited=0
until grep -qx kubelet .tools/ready 2>/dev/null || [ -s .tools/build.exit ] || [ "$waited" -ge "$warm_within" ]; do
  sleep 2
  waited=$((waited + 2))
done
if grep -qx kubelet .tools/ready 2>/dev/null || [ -s .tools/build.exit ]; then
  workers=${NUMA_KUBELETS_TEST_WORKERS:-2}
  echo "== the build made the kubelet within ${waited} s (warm caches): tests in $workers workers"
else
  workers=${NUMA_KUBELETS_TEST_WORKERS:-0}
  echo "== no kubelet after ${waited} s (cold caches: the build needs the cores): tests in one process"
fi
parallel=(-n "$workers")
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
