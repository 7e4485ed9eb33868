#!/usr/bin/env bash
# Starts tools/build.sh in the background, at nice 19, in its own session and process group,
# unless one this script started is still running (then it leaves that one alone): tests/run.sh
# calls it to build beside the tests, and .ci/run calls it first of all, so that the build
# also has the minutes CI spends installing packages. Its output goes to .tools/build.log; when
# it ends, `<exit code> <seconds>` goes to .tools/build.exit; .tools/build.pid names its group.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tools
pid_file=.tools/build.pid

# running: the build this script started is alive (pids are reused: its command line must match).
running() {
  local pid
  pid=$(cat "$pid_file" 2>/dev/null) || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'numa-kubelets-build-in-background'
}

if running; then
  echo "tools/build.sh is already building (process group $(cat "$pid_file")); see .tools/build.log"
  exit 0
fi
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin # where Go lives on these machines
rm -f .tools/ready .tools/build.exit
# Its nice orders it after the tests only where the kernel does not group CPU time by session:
# with autogroups (kernel.sched_autogroup_enabled=1, this CI machine's setting) each session gets
# an equal share whatever its processes' nice, so the build gets as much as the tests' session and
# as each emulated machine (qemu daemonizes into a session of its own). Measured: two busy loops at
# nice 19 in one session and two at nice 0 in another got 49 % of the CPU each. docs/testing.md has
# why that split stays. The marker is the name bash gives the inline script ($0), which `running`
# looks for.
# shellcheck disable=SC2016 # expanded by that inner bash, not here
setsid bash -c 'nice -n 19 bash tools/build.sh >.tools/build.log 2>&1; echo "$? $SECONDS" >.tools/build.exit' \
  numa-kubelets-build-in-background </dev/null &
echo $! >"$pid_file"
echo "tools/build.sh started in the background (process group $!); its log: .tools/build.log"
