# Source me (`. tools/pulumi-env.sh`): the real Pulumi CLI of `make tools` and its Python language
# host, offline: `pulumi preview`/`up` of this directory then run as docs/getting-started.md's Quick start says.
# Plugins come only from .tools/pulumi-home's plugin cache, at exact versions; a missing
# one is an error, never a download. tests/realtools.py sets the same for the tests.
_pulumi_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
export PATH="$_pulumi_root/.tools/bin:$PATH"
export PULUMI_HOME="$_pulumi_root/.tools/pulumi-home"
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
# Resolving a package name asks the Pulumi registry (the network).
export PULUMI_DISABLE_REGISTRY_RESOLVE=true
# No plugin from $PATH (.tools/bin holds the built providers too): the cache's exact
# version or nothing. The bundled Python launchers are still found next to `pulumi`.
export PULUMI_IGNORE_AMBIENT_PLUGINS=true
# The Python that runs the program and its dynamic providers: the repo's venv, the one Pulumi.yaml's
# `virtualenv: .venv` names. The built language host (v3.68.0, docs/toolchain.md)
# predates the CLI handing it the project's runtime options, so it never sees that option and
# takes its interpreter from PULUMI_PYTHON_CMD; so does pulumi-resource-pulumi-python
# (`$PULUMI_PYTHON_CMD -m pulumi.dynamic`). Another project's venv: set it after sourcing this.
export PULUMI_PYTHON_CMD="$_pulumi_root/.venv/bin/python"
# State in a local directory, never the Pulumi Cloud; secrets then need
# PULUMI_CONFIG_PASSPHRASE (or _FILE), which is yours to set.
export PULUMI_BACKEND_URL="${PULUMI_BACKEND_URL:-file://$_pulumi_root/.tools/pulumi-state}"
mkdir -p "$_pulumi_root/.tools/pulumi-state"
unset _pulumi_root
