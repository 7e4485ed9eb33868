# Developer shortcuts; CI runs .ci/run (which runs `make check` and the README's test command).
PYTHON ?= .venv/bin/python
BIN := $(dir $(PYTHON))

.PHONY: check test tools testhost testhost-stop

# Code health: lint, formatting, types, workflow lint. Any finding fails.
check:
	$(BIN)ruff check .
	$(BIN)ruff format --check .
	$(BIN)mypy
	$(BIN)actionlint .github/workflows/*.yml

# The real programs the tests run (Kubernetes, etcd, Pulumi), built from Go modules into .tools/bin.
tools:
	bash tools/build.sh

# Every tier; the real tools build meanwhile (tests/run.sh).
test:
	PYTHON=$(PYTHON) bash tests/run.sh

# Boots the emulated origin machine on 127.0.0.1:2222, where Pulumi.dev.yaml points, with the
# kubelet built here (seconds when built before) at the dev stack's kubeletPath.
testhost:
	bash tools/build.sh kubelet
	$(PYTHON) -m tests.testhost boot --port 2222 --kubelet .tools/bin/kubelet

testhost-stop:
	$(PYTHON) -m tests.testhost stop

