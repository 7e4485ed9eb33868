#!/usr/bin/env bash
# Builds the real programs the tests run (Kubernetes, etcd, Pulumi and its providers) from
# their published Go modules into .tools/bin, through the Go module proxy of `go env
# GOPROXY`. Each program family is a small wrapper module under tools/ (go.mod, go.sum and
# at most a tiny main); nothing prebuilt is downloaded. Go's build and module caches make a
# rebuild with nothing changed take seconds: `go build` leaves an up-to-date binary alone.
#
#   tools/build.sh            every program
#   tools/build.sh kubernetes etcd   only these families
set -euo pipefail
cd "$(dirname "$0")/.."
tools_dir=$PWD/tools
bin_dir=$PWD/.tools/bin
mkdir -p "$bin_dir"

# Release builds: no cgo (static binaries that also run inside the Debian test guests),
# paths trimmed, no VCS stamp (a module from the cache has none).
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

total_started=$SECONDS
# build NAME MODULE_DIR PACKAGE [go build args...]: one binary, timed.
build() {
  local name=$1 module=$2 package=$3
  shift 3
  local started=$SECONDS
  (cd "$tools_dir/$module" && go build -trimpath -o "$bin_dir/$name" "$@" "$package")
  echo "built $name in $((SECONDS - started)) s"
}

# link NAME TARGET: a program of a multi-call binary, started under its own name.
link() { ln -sfn "$2" "$bin_dir/$1"; }

# version_of MODULE_DIR MODULE: the version a wrapper module's go.mod requires.
version_of() { (cd "$tools_dir/$1" && go list -m -f '{{.Version}}' "$2"); }

build_kubernetes() {
  local version minor x
  version=$(version_of kubernetes k8s.io/kubernetes)
  minor=${version#v1.}
  minor=${minor%%.*}
  # What `kubelet --version` prints and what the emulation-version checks compare with;
  # without these the programs call themselves v0.0.0-master.
  x=""
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $package.gitVersion=$version -X $package.gitMajor=1 -X $package.gitMinor=$minor"
    x+=" -X $package.gitTreeState=clean -X $package.buildDate=1970-01-01T00:00:00Z"
  done
  build kubernetes kubernetes . -ldflags "-s -w$x"
  for program in kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
    link "$program" kubernetes
  done
}

build_etcd() {
  # etcd's server module root is its main package; its version is a constant of the api module.
  build etcd etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w"
}

families=("$@")
[ ${#families[@]} -gt 0 ] || families=(kubernetes etcd)
for family in "${families[@]}"; do
  declare -F "build_$family" >/dev/null || { echo "tools/build.sh: unknown program family $family" >&2; exit 2; }
  "build_$family"
done
echo "tools built in $((SECONDS - total_started)) s into $bin_dir"
