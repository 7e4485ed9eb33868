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
pulumi_home=$PWD/.tools/pulumi-home
# The programs finished so far, one name per line: tests/run.sh runs the tests beside this build,
# and a test that needs a program waits until it is listed here (tests/realtools.py).
ready_list=$PWD/.tools/ready
mkdir -p "$bin_dir"
# A full build starts the list anew; a build of some families (`make testhost`'s kubelet) adds to
# it, so that tests waiting beside a full build are not sent back to waiting.
[ $# -gt 0 ] || : >"$ready_list"

# Release builds: no cgo (static binaries that also run inside the Debian test guests),
# paths trimmed, no VCS stamp (a module from the cache has none).
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# The compiler and linker are Go programs: collecting their garbage four times less often trades
# some of this machine's memory (a few GiB at most) for about a tenth of their CPU time
# (measured: etcd's server from an empty build cache, 56-61 s -> 48-58 s on 2 cores).
export GOGC=${GOGC:-400}
# No DWARF from the compiler either (build() passes -gcflags=all=-dwarf=false): every binary is
# linked with -s -w, which drops it anyway, and generating it was a fifth of the compile's CPU
# (measured: etcd's server from an empty build cache, 137 s -> 111 s of CPU).

total_started=$SECONDS
# build NAME MODULE_DIR PACKAGE [go build args...]: one binary, timed.
build() {
  local name=$1 module=$2 package=$3
  shift 3
  local started=$SECONDS
  (cd "$tools_dir/$module" && go build -trimpath -gcflags=all=-dwarf=false -o "$bin_dir/$name" "$@" "$package")
  echo "built $name in $((SECONDS - started)) s"
}

# link NAME TARGET: a program of a multi-call binary, started under its own name.
link() { ln -sfn "$2" "$bin_dir/$1"; }

# ready NAME...: these programs are built and installed (see ready_list).
ready() { printf '%s\n' "$@" >>"$ready_list"; }

# module_dir MODULE_DIR MODULE: where the module cache holds a dependency's source, downloaded
# first (`go list -m` alone prints nothing for a module not yet in the cache: a fresh machine).
module_dir() {
  local dir
  dir=$(cd "$tools_dir/$1" && go mod download "$2" && go list -m -f '{{.Dir}}' "$2")
  [ -n "$dir" ] || { echo "tools/build.sh: $2 is not in the module cache after go mod download" >&2; exit 2; }
  echo "$dir"
}

# version_of MODULE_DIR MODULE: the version a wrapper module's go.mod requires.
version_of() { (cd "$tools_dir/$1" && go list -m -f '{{.Version}}' "$2"); }

# kubernetes_ldflags MODULE_DIR: what `kubelet --version` prints and what the emulation-version
# checks compare with; without these the programs call themselves v0.0.0-master.
kubernetes_ldflags() {
  local version minor x package
  version=$(version_of "$1" k8s.io/kubernetes)
  minor=${version#v1.}
  minor=${minor%%.*}
  x="-s -w"
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $package.gitVersion=$version -X $package.gitMajor=1 -X $package.gitMinor=$minor"
    x+=" -X $package.gitTreeState=clean -X $package.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$x"
}

# The kubelet right after the engine: every real-host test runs it (through the engine), and it
# compiles three quarters of what the control plane does (by source size), so those tests start
# before the rest is built. Built on its own, not as a link to the multi-call binary below: it is
# copied into the emulated hosts.
build_kubelet() {
  build kubelet kubernetes k8s.io/kubernetes/cmd/kubelet -ldflags "$(kubernetes_ldflags kubernetes)"
  # The KubeletConfiguration fields of this release, for the check of the core's copy.
  build kubelet-schema kubernetes ./kubeletschema
  ready kubelet kubelet-schema
}

# The control plane as one multi-call binary, and kube-proxy on its own (it goes into an image
# in the emulated hosts). Most of their packages are in the build cache after the kubelet.
build_kubernetes() {
  local ldflags
  ldflags=$(kubernetes_ldflags kubernetes)
  build kubernetes kubernetes . -ldflags "$ldflags"
  for program in kube-apiserver kube-controller-manager kube-scheduler; do
    link "$program" kubernetes
  done
  build kube-proxy kubernetes k8s.io/kubernetes/cmd/kube-proxy -ldflags "$ldflags"
  ready kubernetes kube-apiserver kube-controller-manager kube-scheduler kube-proxy
}

# The previous minor's kubelet (tools/kubelet-previous): what the rolling-upgrade tests
# upgrade from, to the kubelet above.
build_kubelet_previous() {
  build kubelet-previous kubelet-previous k8s.io/kubernetes/cmd/kubelet -ldflags "$(kubernetes_ldflags kubelet-previous)"
  ready kubelet-previous
}

build_etcd() {
  # etcd's server module root is its main package; its version is a constant of the api module.
  build etcd etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w"
  ready etcd
}

# The generic device plugin (github.com/squat/generic-device-plugin, tools/generic-device-plugin):
# a real device plugin that advertises device nodes chosen by path globs, which the device tests
# run once per NUMA kubelet (docs/devices-host-notes.md). Its module root is its main package;
# the version ldflag is what its release build sets (else `--version` prints "was not built properly").
# Beside it the tests' double of a plugin that reports its devices' NUMA node
# (tools/topology-device-plugin: none that does can run on the emulated hosts; its main says why).
build_generic_device_plugin() {
  local version
  version=$(version_of generic-device-plugin github.com/squat/generic-device-plugin)
  build generic-device-plugin generic-device-plugin github.com/squat/generic-device-plugin \
    -ldflags "-s -w -X github.com/squat/generic-device-plugin/version.Version=$version"
  build topology-device-plugin topology-device-plugin . -ldflags "-s -w"
  ready generic-device-plugin topology-device-plugin
}

# The Pulumi CLI, with the flags of its release build (pulumi/pulumi .goreleaser.yml):
# without the version the CLI calls itself v0.0.0 and the Automation API refuses it.
build_pulumi() {
  local version
  version=$(version_of pulumi github.com/pulumi/pulumi/pkg/v3)
  build pulumi pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi -tags osusergo,grpcnotrace \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version"
  # The Python launchers the CLI looks for next to itself (even with
  # PULUMI_IGNORE_AMBIENT_PLUGINS): the dynamic providers' pulumi-resource-pulumi-python and
  # the language host's pulumi-language-python-exec. They are scripts in the sdk module's
  # zip, which drops their executable bit.
  local sdk
  sdk=$(module_dir pulumi github.com/pulumi/pulumi/sdk/v3)
  install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$sdk/python/cmd/pulumi-language-python-exec" "$bin_dir/"
  # The Python language host, which runs `pulumi preview`/`up` of a Python project directory.
  # Its own module (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is not
  # served; up to v3.68.0 it was a package of the sdk module, which is (tools/pulumi-language-python).
  # The CLI talks to it over the language plugin's gRPC protocol, which has stayed compatible;
  # it starts the v3.274.1 pulumi-language-python-exec above.
  local host_version
  host_version=$(version_of pulumi-language-python github.com/pulumi/pulumi/sdk/v3)
  build pulumi-language-python pulumi-language-python github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$host_version"
  ready pulumi pulumi-resource-pulumi-python pulumi-language-python-exec pulumi-language-python
  build_plugin_doubles
}

# pin_of PACKAGE: the exact version constraints.txt pins a Python package to; a provider
# plugin is built at its Python SDK's version, so the two always agree.
pin_of() { sed -n "s/^$1==//p" constraints.txt; }

# install_plugin NAME VERSION: puts the built pulumi-resource-NAME into the CLI's plugin
# cache (.tools/pulumi-home), the one place the tests' CLI takes plugins from (see
# tools/pulumi-env.sh); skipped when that version is already there byte for byte.
install_plugin() {
  local name=$1 version=$2 file=$bin_dir/pulumi-resource-$1
  local installed=$pulumi_home/plugins/resource-$name-v$version/pulumi-resource-$name
  cmp -s "$file" "$installed" && return
  [ -x "$bin_dir/pulumi" ] || { echo "tools/build.sh: installing a plugin takes the CLI: build family pulumi first" >&2; exit 2; }
  PULUMI_HOME=$pulumi_home PULUMI_SKIP_UPDATE_CHECK=true \
    "$bin_dir/pulumi" plugin install resource "$name" "$version" --file "$file" --reinstall
}

# The numa-kubelets test doubles of pulumi-command and pulumi-random (tools/plugin-doubles),
# whose provider modules the module proxy refuses: built on the framework the real
# pulumi-command uses and installed at the versions their Python SDKs ask for. The
# conformance suites (tests/e2e/test_command_plugin.py, test_random_plugin.py) pin them
# against the real plugins' behaviour.
build_plugin_doubles() {
  local name version
  for name in command random; do
    version=$(pin_of "pulumi-$name")
    build "pulumi-resource-$name" plugin-doubles "./$name" -ldflags "-s -w -X main.version=$version"
    install_plugin "$name" "$version"
  done
  ready pulumi-resource-command pulumi-resource-random
}

# The kubernetes provider at the version of the pulumi-kubernetes Python SDK. Its release
# main embeds generated files (see tools/pulumi-kubernetes/main.go): they are generated
# here by the provider's own generate.go, from its module, and only when it changed.
# Compiled without inlining (-l; a later -gcflags than build()'s wins): the largest family and
# the last, which the real-engine tier waits for on a fresh machine, while its own work in the
# tests (a few resources per `pulumi up`, on this machine) is small. Measured: etcd's server from
# an empty build cache took 75 s of CPU without inlining, 89 s with it.
provider_gcflags="all=-dwarf=false -l"
build_pulumi_kubernetes() {
  local version dir gen
  version=$(pin_of pulumi-kubernetes)
  dir=$(module_dir pulumi-kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4)
  gen=$tools_dir/pulumi-kubernetes/gen
  if [ "$(cat "$gen/source" 2>/dev/null)" != "$dir $version" ]; then
    rm -rf "$gen" && mkdir -p "$gen"
    ln -s "$dir/cmd/pulumi-resource-kubernetes/schema.json" "$dir/cmd/pulumi-resource-kubernetes/terraform-mapping.json" "$gen/"
    # With the build's flags, so that the packages it shares with the provider compile once.
    (cd "$gen" && VERSION=$version go run -trimpath -gcflags="$provider_gcflags" "$dir/cmd/pulumi-resource-kubernetes/generate.go")
    echo "$dir $version" >"$gen/source"
  fi
  build pulumi-resource-kubernetes pulumi-kubernetes . -gcflags="$provider_gcflags" \
    -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$version"
  install_plugin kubernetes "$version"
  ready pulumi-resource-kubernetes
}

# prefetch_modules MODULE_DIR PACKAGE: downloads, in the background, the modules PACKAGE's build
# will need (`go list -deps` fetches what it loads), so that they arrive while the family before
# it compiles. The module cache locks each download: the build waits for one still under way.
prefetch_modules() {
  (cd "$tools_dir/$1" && go list -deps "$2" >/dev/null 2>&1) &
}

families=("$@")
# pulumi before its providers: installing a plugin takes the CLI. The order is the one the tests
# that need them run in (tests/realtools.py BUILD_ORDER). The engine (the CLI, its language host,
# the plugin doubles: a third of the kubelet's build) and the kubelet first: every real-host
# scenario needs both, so they start as soon as both are there and run while the control plane
# builds (the engine's own tests run after the machines' under tests/run.sh: tests/conftest.py).
if [ ${#families[@]} -eq 0 ]; then
  families=(pulumi kubelet kubernetes etcd generic_device_plugin kubelet_previous pulumi_kubernetes)
  prefetch_modules kubernetes k8s.io/kubernetes/cmd/kubelet
fi
for family in "${families[@]}"; do
  declare -F "build_$family" >/dev/null || { echo "tools/build.sh: unknown program family $family" >&2; exit 2; }
  "build_$family"
done
wait # the prefetch, long over
echo "tools built in $((SECONDS - total_started)) s into $bin_dir"
