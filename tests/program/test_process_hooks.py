"""The harness runs __main__.py in the test process: what the program sets for its own process
(components/engine_stop.py: the engine's SIGINT and a call the engine cancelled end it) is undone
after each run, so that a later test's inline program keeps the SDK's exceptions (a cancelled call
had ended a test worker with os._exit) and pytest its Ctrl+C."""

from __future__ import annotations

import signal

from pulumi.runtime import settings

from tests.program import harness


def test_the_programs_process_hooks_are_undone_after_a_run(dev_config):
    before = (signal.getsignal(signal.SIGINT), settings.grpc_error_to_exception)
    harness.run_program(dev_config, secret_keys=())
    assert (signal.getsignal(signal.SIGINT), settings.grpc_error_to_exception) == before
