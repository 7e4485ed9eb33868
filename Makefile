# Developer shortcuts; CI runs .ci/run (which runs `make check` and the README's test command).
PYTHON ?= .venv/bin/python
BIN := $(dir $(PYTHON))

.PHONY: check docs prerequisites test tools testhost testhost-stop demo demo-down

# What the machine must have (Debian packages, Go, Python with venv, free disk), checked in
# a second before anything long starts; as root where apt-get exists it installs the missing
# packages, otherwise it names them and the command that installs them (tools/prerequisites.sh).
prerequisites:
	bash tools/prerequisites.sh

# Code health: lint, formatting, types, workflow lint, and the documentation: the generated
# reference pages current, the site built strictly (a broken link or anchor is an error) into the
# gitignored .site/. Any finding fails.
check:
	$(BIN)ruff check .
	$(BIN)ruff format --check .
	$(BIN)mypy
	$(BIN)actionlint .github/workflows/*.yml
	$(PYTHON) -m numa_kubelets.docgen --check
	NO_MKDOCS_2_WARNING=1 $(BIN)mkdocs build --strict --quiet --site-dir .site

# Rewrites the generated documentation pages (docs/reference/) after a change to the models.
docs:
	$(PYTHON) -m numa_kubelets.docgen

# The real programs the tests run (Kubernetes, etcd, Pulumi), built from Go modules into .tools/bin.
tools:
	command -v go >/dev/null || export PATH=$$PATH:/usr/local/go/bin; bash tools/build.sh

# The Python environment of the program, its tests and the demo (what .ci/run installs too),
# after the check (order-only: the check runs first but never makes the venv out of date).
.venv/bin/python: | prerequisites
	python3 -m venv .venv
	.venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt

# A newcomer's first command: the product on the emulated origin machine, under the real engine
# (tests/realengine/demo.py): builds or reuses the tools it runs (not the tests' previous-minor
# kubelet), boots the machine, starts the local control plane, `pulumi up` of the demo stack,
# prints the proof; everything stays up.
DEMO_TOOLS := kubelet pulumi kubernetes etcd pulumi_kubernetes
demo: prerequisites $(PYTHON)
	command -v go >/dev/null || export PATH=$$PATH:/usr/local/go/bin; bash tools/build.sh $(DEMO_TOOLS)
	$(PYTHON) -m tests.realengine.demo up

# Destroys the demo stack, stops its control plane and machine, removes .demo/.
demo-down: $(PYTHON)
	$(PYTHON) -m tests.realengine.demo down

# Every tier; the real tools build meanwhile (tests/run.sh).
test: prerequisites
	PYTHON=$(PYTHON) bash tests/run.sh

# Boots the emulated origin machine on 127.0.0.1:2222, where Pulumi.dev.yaml points, with the
# kubelet built here (seconds when built before) at the dev stack's kubeletPath.
testhost: prerequisites
	bash tools/build.sh kubelet
	$(PYTHON) -m tests.testhost boot --port 2222 --kubelet .tools/bin/kubelet

testhost-stop:
	$(PYTHON) -m tests.testhost stop

