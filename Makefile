# Developer shortcuts; CI runs .ci/run (which runs `make check` and the README's test command).
PYTHON ?= .venv/bin/python
BIN := $(dir $(PYTHON))

.PHONY: check test testhost testhost-stop tools

# Code health: lint, formatting, types, workflow lint. Any finding fails.
check:
	$(BIN)ruff check .
	$(BIN)ruff format --check .
	$(BIN)mypy
	$(BIN)actionlint .github/workflows/*.yml

test:
	$(PYTHON) -m pytest

# Boots the emulated origin machine on 127.0.0.1:2222, where Pulumi.dev.yaml points.
testhost:
	$(PYTHON) -m tests.testhost boot --port 2222

testhost-stop:
	$(PYTHON) -m tests.testhost stop

# Builds the real programs the tests run (Kubernetes, the Pulumi CLI, its providers) from
# their Go modules into .tools/; seconds when nothing changed. See README "Building the real tools".
tools:
	bash tools/build.sh
