#!/usr/bin/env bash
# What this project needs of the machine, checked before anything long starts (`make demo`,
# `make test`, `make testhost` and .ci/run call it first): the Debian packages (the one list of
# them: .ci/run installs through this script too), Go, Python with venv, and free disk.
#
# Run as root where apt-get exists, it installs the missing packages itself (apt-get update
# once, then install --no-install-recommends) and checks again. Otherwise it names them, prints
# the command to run and exits 1, in well under a second. Go that is missing or too old, a
# Python that is too old, or too little free disk: a message and exit 1, and nothing is
# installed (Debian's golang-go is older than the tools need; the disk is the user's to free).
#
#   tools/prerequisites.sh                   every check (packages, python, go, disk)
#   tools/prerequisites.sh go disk           only these (.ci/run: before its background build)
#   tools/prerequisites.sh --list-packages   the Debian packages, one per line
#
# Exit status: 0 all there (after installing, as root), 1 something is missing, 2 bad usage.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

# The Debian packages, each with what shows it is installed (a command, searched on PATH and in
# the sbin directories a non-root PATH often lacks, or an absolute path) and why it is needed.
# python3 and python3-venv are checked by `check_python` (a Python not from Debian counts too).
REQUIRED_PACKAGES=$(
  cat <<'LIST'
qemu-system-x86  qemu-system-x86_64  boots the emulated NUMA test hosts (TCG)
qemu-utils       qemu-img            their throwaway disk overlays
mmdebstrap       mmdebstrap          bootstraps the test hosts' root file system
e2fsprogs        mkfs.ext4           packs it into a disk image without a loop mount
debian-archive-keyring  /usr/share/keyrings/debian-archive-keyring.gpg  mmdebstrap checks the suites' signatures
openssh-client   ssh                 reaches the test hosts; its ssh-keygen makes the e2e tests' keys
openssh-server   sshd                the command plugin's conformance suite runs its own sshd
ca-certificates  /etc/ssl/certs/ca-certificates.crt  pip, Go and mmdebstrap over HTTPS
socat            socat               relays the guests' one connection to the test API server
systemd          systemd-analyze     lints the rendered units
shellcheck       shellcheck          lints the generated scripts and the repository's
dash             dash                runs the generated scripts as a host's /bin/sh would
make             make                the developer commands (make demo, make test, make check)
curl             curl                one of the tools the hosts' API server check tries
openssl          openssl             another of them
iproute2         ip                  the network namespace scripts in the unit tests' sandboxes
util-linux       unshare             those sandboxes; its setsid starts the background build
LIST
)
# The sbin directories where sshd and mkfs.ext4 live, not on every user's PATH.
SBIN_DIRS=/usr/local/sbin:/usr/sbin:/sbin
# Where Go lives on these machines when it is not on PATH (as .ci/run and the Makefile look).
GO_FALLBACK_DIR=/usr/local/go/bin

problems=()         # what stops the run and cannot be installed here (Go, Python's version, disk)
missing_packages=() # Debian packages to install
found=()            # what the checks found, for the one line printed when all is there

say() { printf 'prerequisites: %s\n' "$*"; }

# installed WITNESS: the command or file that shows a package is installed is there.
installed() {
  case $1 in
    /*) [ -e "$1" ] ;;
    *) PATH="$PATH:$SBIN_DIRS" command -v "$1" >/dev/null 2>&1 ;;
  esac
}

check_packages() {
  local package witness
  while read -r package witness _; do
    [ -n "$package" ] || continue
    installed "$witness" || missing_packages+=("$package")
  done <<<"$REQUIRED_PACKAGES"
  found+=("$(grep -c . <<<"$REQUIRED_PACKAGES") Debian packages")
}

# The Python that `make` and .ci/run create .venv with (`python3 -m venv`), at the version
# pyproject.toml requires; venv needs ensurepip, which Debian ships in python3-venv.
check_python() {
  local wanted have
  wanted=$(sed -n 's/^requires-python = ">=\([0-9.]*\)"$/\1/p' pyproject.toml)
  [ -n "$wanted" ] || { problems+=("pyproject.toml: no requires-python \">=X.Y\" line to check python3 against"); return; }
  if ! command -v python3 >/dev/null 2>&1; then
    missing_packages+=(python3 python3-venv)
    return
  fi
  have=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if ! version_at_least "$have" "$wanted"; then
    problems+=("python3 is $have ($(command -v python3)); the project needs $wanted or newer (pyproject.toml)")
    return
  fi
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing_packages+=(python3-venv)
  found+=("Python $have")
}

# version_at_least HAVE WANTED: dotted versions, compared number by number.
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; }

# The newest `go` line of the tools' wrapper modules: the Go that builds all of them.
go_version_wanted() {
  sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' tools/*/go.mod | sort -V | tail -n 1
}

# go_command: the go that tools/build.sh will run (PATH first, then where these machines keep it).
go_command() {
  command -v go 2>/dev/null && return
  [ -x "$GO_FALLBACK_DIR/go" ] && echo "$GO_FALLBACK_DIR/go"
}

check_go() {
  local wanted go have
  wanted=$(go_version_wanted)
  if ! go=$(go_command); then
    problems+=("Go $wanted or newer is needed (tools/*/go.mod) and is neither on PATH nor in $GO_FALLBACK_DIR: install Go's release tarball into /usr/local/go (Debian's golang-go is older)")
    return
  fi
  # GOTOOLCHAIN=local: the version of this go itself, never one it would download.
  have=$(cd / && GOTOOLCHAIN=local "$go" env GOVERSION 2>/dev/null) || have=unknown
  have=${have#go}
  if ! version_at_least "${have%%[!0-9.]*}" "$wanted"; then
    problems+=("$go is Go $have; tools/*/go.mod need Go $wanted or newer (nothing downloads a newer toolchain here): install it into /usr/local/go")
    return
  fi
  found+=("Go $have")
}

# --- Free disk -----------------------------------------------------------------------------
# What a fresh machine fills, by where it goes. A part counts only while what shows it done is
# missing (a family's main module in Go's module cache, which is this machine's; a program in
# this clone's .tools/bin; an image in the test host cache), so a machine that built before needs
# little more. The figures are a cold build's, rounded up (README, Prerequisites); the parts
# that share a file system are added up and compared with its free space.
declare -A needed_mib=() available_mib=() part_mib=() # part_mib: by "file system|part"

# existing_ancestor PATH: the nearest directory of PATH that exists (df needs one).
existing_ancestor() {
  local path=$1
  until [ -d "$path" ]; do path=$(dirname "$path"); done
  echo "$path"
}

# need DONE_MARKER DIRECTORY MIB PART: MIB more of PART go into DIRECTORY unless DONE_MARKER
# exists (an empty marker: always).
need() {
  local marker=$1 directory=$2 mib=$3 part=$4 mount free
  if [ -n "$marker" ] && [ -e "$marker" ]; then return; fi
  read -r mount free < <(df -P -k "$(existing_ancestor "$directory")" | awk 'NR == 2 { print $6, $4 }')
  available_mib[$mount]=$((free / 1024))
  needed_mib[$mount]=$((${needed_mib[$mount]:-0} + mib))
  part_mib[$mount|$part]=$((${part_mib[$mount|$part]:-0} + mib))
}

# parts_on MOUNT: "Go modules 5.8 GiB, ..." of what the file system at MOUNT is to hold.
parts_on() {
  local key parts=""
  while IFS= read -r key; do
    [ "${key%%|*}" != "$1" ] || parts+="${parts:+, }${key#*|} $(gib "${part_mib[$key]}") GiB"
  done < <(printf '%s\n' "${!part_mib[@]}" | sort)
  echo "$parts"
}

# gib MIB: in GiB, rounded to one decimal.
gib() {
  local tenths=$((($1 * 10 + 512) / 1024))
  echo "$((tenths / 10)).$((tenths % 10))"
}

# module_zip MODULE_CACHE WRAPPER_DIR MODULE: where Go's module cache keeps the zip of the
# version of MODULE that tools/WRAPPER_DIR/go.mod requires (these paths have no capitals,
# which the cache would escape).
module_zip() {
  local version
  version=$(sed -n -E "s#^(require)?[[:space:]]*$3[[:space:]]+(v[^[:space:]]+).*#\2#p" "tools/$2/go.mod" | head -n 1)
  echo "$1/cache/download/$3/@v/${version:-unknown}.zip"
}

# first_image IMAGES_DIR SUITE: a finished test host image of SUITE, or nothing.
first_image() {
  local manifest
  for manifest in "$1/$2"-*/manifest.json; do
    if [ -e "$manifest" ]; then
      echo "$manifest"
      return
    fi
  done
}

check_disk() {
  local go modules="" cache="" bin=$repo/.tools/bin images tmp=${TMPDIR:-/tmp} mount
  local kubernetes previous etcd pulumi pulumi_kubernetes
  if go=$(go_command); then
    modules=$(cd / && GOTOOLCHAIN=local "$go" env GOMODCACHE) || modules=""
    cache=$(cd / && GOTOOLCHAIN=local "$go" env GOCACHE) || cache=""
  fi
  # Without a Go that answers (the go check says why), Go's defaults: the figure then holds once
  # Go is installed.
  modules=${modules:-${GOMODCACHE:-${GOPATH:-$HOME/go}/pkg/mod}}
  cache=${cache:-${GOCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/go-build}}
  images=$(readlink -f .testhost 2>/dev/null || echo "$repo/.testhost")/images
  kubernetes=$(module_zip "$modules" kubernetes k8s.io/kubernetes)
  previous=$(module_zip "$modules" kubelet-previous k8s.io/kubernetes)
  etcd=$(module_zip "$modules" etcd go.etcd.io/etcd/server/v3)
  pulumi=$(module_zip "$modules" pulumi github.com/pulumi/pulumi/pkg/v3)
  pulumi_kubernetes=$(module_zip "$modules" pulumi-kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4)

  # Each family of tools/build.sh: its modules and build cache (Go's, shared by every clone),
  # its programs (this clone's). Measured in a cold build on 2026-12-06 (empty caches, du after
  # each family), rounded up: Kubernetes' modules 0.5 GB (then 0.3 more with the control plane
  # and etcd), the kubelet's build cache 2.5 GB and the control plane's 0.8 more, programs
  # 0.2 + 0.2; Pulumi's modules 2.2 GB, build cache 2.5 GB, programs 0.3 with the plugin cache;
  # etcd's cache 0.25 GB, etcd 27 MB; the previous Kubernetes' modules 0.2 GB, its build cache
  # 1.9 GB; pulumi-kubernetes' modules 0.55 GB (its build cache, still growing past 1 GB when
  # measured, is an estimate).
  need "$kubernetes" "$modules" 1024 "Go modules"
  need "$kubernetes" "$cache" 3584 "Go build cache"
  need "$bin/kubelet" "$bin" 256 ".tools"
  need "$bin/kubernetes" "$bin" 256 ".tools"
  need "$previous" "$modules" 512 "Go modules"
  need "$previous" "$cache" 2560 "Go build cache"
  need "$bin/kubelet-previous" "$bin" 128 ".tools"
  need "$etcd" "$modules" 256 "Go modules"
  need "$etcd" "$cache" 512 "Go build cache"
  need "$bin/etcd" "$bin" 64 ".tools"
  need "$pulumi" "$modules" 2560 "Go modules"
  need "$pulumi" "$cache" 3072 "Go build cache"
  need "$bin/pulumi" "$bin" 512 ".tools"
  need "$pulumi_kubernetes" "$modules" 1024 "Go modules"
  need "$pulumi_kubernetes" "$cache" 3072 "Go build cache"
  need "$bin/pulumi-resource-kubernetes" "$bin" 512 ".tools"
  # The test host images (tests/testhost/image.py): about 1 GiB each, and its root tree beside
  # it while mkfs.ext4 packs it.
  need "$(first_image "$images" bookworm)" "$images" 1536 "test host images"
  need "$(first_image "$images" trixie)" "$images" 1536 "test host images"
  need "$repo/.venv/bin/python" "$repo/.venv" 768 ".venv"
  # Always: what running test hosts write to their disk overlays, and their logs.
  need "" "$tmp" 2048 "running test hosts"

  for mount in "${!needed_mib[@]}"; do
    found+=("$(gib "${needed_mib[$mount]}") GiB more disk needed on $mount, $(gib "${available_mib[$mount]}") GiB free")
    if [ "${needed_mib[$mount]}" -gt "${available_mib[$mount]}" ]; then
      problems+=("$(printf 'too little free disk: %s has %s MiB free, this needs %s MiB more (%s)' \
        "$mount" "${available_mib[$mount]}" "${needed_mib[$mount]}" "$(parts_on "$mount")")")
    fi
  done
}

# --- Installing ------------------------------------------------------------------------------
apt_command() { echo "apt-get update && apt-get install -y --no-install-recommends $*"; }

install_packages() {
  local log
  log=$(mktemp)
  say "installing ${missing_packages[*]} (apt-get, log: $log)"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing_packages[@]}"; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    say "apt-get failed installing ${missing_packages[*]}; its log: $log" >&2
    exit 1
  fi
  rm -f "$log"
}

main() {
  local checks=("$@") check
  [ ${#checks[@]} -gt 0 ] || checks=(packages python go disk)
  for check in "${checks[@]}"; do
    case $check in
      --list-packages)
        awk 'NF { print $1 }' <<<"$REQUIRED_PACKAGES"
        echo python3
        echo python3-venv
        return 0
        ;;
      packages | python | go | disk) "check_$check" ;;
      *)
        echo "usage: $0 [--list-packages | packages python go disk ...]" >&2
        return 2
        ;;
    esac
  done

  if [ ${#problems[@]} -gt 0 ]; then
    printf 'prerequisites: %s\n' "${problems[@]}" >&2
    [ ${#missing_packages[@]} -eq 0 ] ||
      say "also missing Debian packages ${missing_packages[*]}: $(apt_command "${missing_packages[@]}")" >&2
    return 1
  fi
  if [ ${#missing_packages[@]} -eq 0 ]; then
    local summary
    summary=$(printf '%s; ' "${found[@]}")
    say "all there (${summary%; })"
    return 0
  fi

  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "missing Debian packages ${missing_packages[*]}" >&2
    if command -v apt-get >/dev/null 2>&1; then
      say "install them as root: sudo sh -c '$(apt_command "${missing_packages[@]}")'" >&2
      say "(or run this check as root, which installs them: sudo bash tools/prerequisites.sh)" >&2
    else
      say "no apt-get here: install what provides $(missing_witnesses) with this system's package manager" >&2
    fi
    return 1
  fi

  install_packages
  # Installed: now every one of them must show.
  local wanted=("${missing_packages[@]}")
  missing_packages=()
  for check in "${checks[@]}"; do
    case $check in packages | python) "check_$check" ;; esac
  done
  if [ ${#missing_packages[@]} -gt 0 ]; then
    say "apt-get installed ${wanted[*]}, but these still do not show: ${missing_packages[*]} ($(missing_witnesses))" >&2
    return 1
  fi
  say "installed ${wanted[*]}"
}

# missing_witnesses: the commands or files of the missing packages, for a non-Debian system.
missing_witnesses() {
  local package witness names=()
  while read -r package witness _; do
    [[ " ${missing_packages[*]} " != *" $package "* ]] || names+=("$witness")
  done <<<"$REQUIRED_PACKAGES"
  [[ " ${missing_packages[*]} " != *" python3 "* ]] || names+=("python3")
  [[ " ${missing_packages[*]} " != *" python3-venv "* ]] || names+=("python3 -m venv")
  local IFS=,
  echo "${names[*]}"
}

main "$@"
