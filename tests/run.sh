#!/usr/bin/env bash
# Every test tier, the real-host tier included (what `make test` and CI run), while the real
# programs build: tools/build.sh runs in the background at the lowest CPU priority (the
# emulated hosts keep their pace; the build takes the CPU time the tests leave idle). The tests
# that need no built program run first; those marked `realtools(family)` follow in the order the
# build finishes the families, each waiting for the programs it asks for (tests/realtools.py).
# Every real-host scenario runs the real kubelet, so on a fresh machine the kubernetes family
# builds nearly alone first (about 15 minutes); the whole build takes about 35 minutes alone, and
# far longer beside the emulated hosts. On a machine that built before, seconds.
#
#   tests/run.sh                 every tier
#   tests/run.sh -x -k cluster   pytest arguments
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
mkdir -p .tools
rm -f .tools/ready .tools/build.exit
started=$SECONDS

# Its own process group, so that a failed or interrupted run stops the whole build with it.
setsid bash -c 'nice -n 19 bash tools/build.sh >.tools/build.log 2>&1; echo "$? $SECONDS" >.tools/build.exit' &
build=$!
trap 'kill -- -$build 2>/dev/null' EXIT

tests_rc=0
NUMA_KUBELETS_TOOLS_BUILDING=1 "$python" -m pytest "$@" || tests_rc=$?
if [ "$tests_rc" -ne 0 ]; then
  echo "== tests failed (exit $tests_rc) after $((SECONDS - started)) s; tools/build.sh stopped. Its log so far:"
  tail -n 30 .tools/build.log
  exit "$tests_rc"
fi

wait "$build"
trap - EXIT
cat .tools/build.log
read -r build_rc build_seconds <.tools/build.exit
echo "== tools/build.sh: exit $build_rc in $build_seconds s, beside the tests; all: $((SECONDS - started)) s"
[ "$build_rc" -eq 0 ]
