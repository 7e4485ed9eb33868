# Developer shortcuts; CI runs .ci/run.
PYTHON ?= .venv/bin/python

.PHONY: test testhost testhost-stop

test:
	$(PYTHON) -m pytest

# Boots the emulated origin machine on 127.0.0.1:2222, where Pulumi.dev.yaml points.
testhost:
	$(PYTHON) -m tests.testhost boot --port 2222

testhost-stop:
	$(PYTHON) -m tests.testhost stop
