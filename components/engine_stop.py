"""How the program ends when the engine stops it: at once, and without a traceback.

The CLI ends an update that failed (a resource's error) or was cancelled by closing its plugins,
the language host among them: SIGINT to the plugin's process group, SIGKILL 5 s later (pulumi
sdk v3.274.1, go/common/resource/plugin/plugin.go: `cmdutil.InterruptChildren`; every plugin
starts in a group of its own, `cmdutil.RegisterProcessGroup`). The Python language host v3.68.0
runs the program as a plain child (`exec.Cmd` without a group of its own) and handles no
signal, so the program gets that SIGINT too, often while it is still registering resources.
Python turns it into KeyboardInterrupt, and the interpreter printed its traceback (some 80 lines
inside the SDK, asyncio and grpc, chained to the SDK's "Resource monitor has terminated") under
the stack, beside the engine's own error. A terminal's Ctrl+C goes to the CLI's foreground
process group, never to the program's: a SIGINT here only ever means that the engine is done.

Before that SIGINT, the engine cancels the calls of the program it was still serving (their
context ends with the update): a registration then fails with gRPC's CANCELLED, which the SDK
turns into `Exception("context canceled")`, and the language host printed it as "Program failed
with an unhandled exception" with its traceback (seen on a busy machine, where the program
registered its next resource before the SIGINT came; `tests/e2e/test_error_messages.py`). A
cancelled call to the engine means the same as its SIGINT: the engine is done.

By then the engine has said why the update ended (the failed resource's error, "update
canceled"), so the program ends quietly, with status 32: the language host reads it as "exited
after showing a message" and adds no line of its own. Nothing is hidden: the program's own
failures are exceptions, not signals, and the SDK still reports them with their traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType
from typing import NoReturn

import grpc  # type: ignore[import-untyped]  # grpcio ships no types
from pulumi.runtime import settings

# pulumi-language-python's PYTHON_PROCESS_EXITED_AFTER_SHOWING_USER_ACTIONABLE_MESSAGE_CODE.
EXITED_AFTER_SHOWING_A_MESSAGE = 32


def _end_quietly() -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        # A write the signal interrupted, a closed pipe: nothing left to keep.
        with contextlib.suppress(Exception):
            stream.flush()
    # Not SystemExit: that would unwind through the SDK's pending RPCs to a monitor that is gone.
    os._exit(EXITED_AFTER_SHOWING_A_MESSAGE)


def _stopped_by_the_engine(_signum: int, _frame: FrameType | None) -> None:
    _end_quietly()


def end_quietly_when_the_engine_stops() -> None:
    """From now on, the engine's SIGINT, or a call the engine cancelled, ends the program without a
    word (the engine has said it)."""
    signal.signal(signal.SIGINT, _stopped_by_the_engine)
    # The SDK turns a failed call to the engine into an exception with this function of its
    # settings module: its handle_grpc_error, which every resource registration's call uses, looks
    # it up there when called.
    to_exception = settings.grpc_error_to_exception

    def cancelled_by_the_engine_ends_quietly(error: grpc.RpcError) -> Exception:
        if error.code() == grpc.StatusCode.CANCELLED:
            _end_quietly()
        return to_exception(error)

    settings.grpc_error_to_exception = cancelled_by_the_engine_ends_quietly  # type: ignore[assignment]
