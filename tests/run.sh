#!/usr/bin/env bash
# Every test tier, the real-host tier included (what `make test` and CI run), while the real
# programs build: `tools/build.sh` runs in the background at the lowest CPU priority (the
# emulated hosts' timing stays the tests' own; the build takes the CPU time they leave idle),
# the tests that need no built program run meanwhile (NUMA_KUBELETS_TOOLS_PENDING makes one
# that asks for a tool fail, naming the marker it lacks), then the `realtools` ones.
# On a fresh machine the build takes about half an hour; on one that built before, seconds.
#
#   tests/run.sh                 every tier
#   tests/run.sh -x -k pods      pytest arguments go to both phases
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
mkdir -p .tools
build_log=.tools/build.log
started=$SECONDS

# Its own process group, so that an interrupted run stops the whole build with it.
setsid nice -n 19 bash tools/build.sh >"$build_log" 2>&1 &
build=$!
trap 'kill -- -$build 2>/dev/null' EXIT

# pytest's 5: nothing collected in this phase (arguments that select one kind of test only).
phase() {
  local rc=0
  "$@" || rc=$?
  [ "$rc" -eq 5 ] && rc=0
  return "$rc"
}

echo "== tests that need no built program (tools/build.sh runs meanwhile, log: $build_log)"
phase env NUMA_KUBELETS_TOOLS_PENDING=1 "$python" -m pytest -m "not realtools" "$@"
without_tools=$?
echo "== tests that need no built program: $((SECONDS - started)) s, exit $without_tools"

build_rc=0
wait "$build" || build_rc=$?
trap - EXIT
cat "$build_log"
echo "== real tools ready $((SECONDS - started)) s after the start (tools/build.sh exit $build_rc)"
if [ "$build_rc" -ne 0 ]; then
  echo "tools/build.sh failed: the tests that need the real programs cannot run" >&2
  exit 1
fi

phase "$python" -m pytest -m realtools "$@"
with_tools=$?
echo "== tests that need the real programs: exit $with_tools; all tests: $((SECONDS - started)) s"
[ "$without_tools" -eq 0 ] && [ "$with_tools" -eq 0 ]
