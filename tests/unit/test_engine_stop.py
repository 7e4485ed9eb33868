"""components/engine_stop.py: the engine's SIGINT, or a call the engine cancelled, ends the program
quietly; nothing else changes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from components import engine_stop

REPO = Path(__file__).resolve().parents[2]
# A program that waits (as one waiting on its resource registrations), with or without the handler.
WAITING = """
import signal, sys, time
# Python's own handler, which it installs only when SIGINT is not ignored at its start: a test run
# started in the background of a non-interactive shell (nohup ... &) passes SIGINT on ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
{install}
print("waiting", flush=True)
time.sleep(60)
"""
INSTALL = "from components import engine_stop; engine_stop.end_quietly_when_the_engine_stops()"


def interrupted(install: str) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", WAITING.format(install=install)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "waiting\n"
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_the_engines_sigint_ends_the_program_without_a_word():
    result = interrupted(INSTALL)
    assert (result.returncode, result.stdout, result.stderr) == (engine_stop.EXITED_AFTER_SHOWING_A_MESSAGE, "", "")


def test_without_it_python_prints_the_keyboardinterrupt_traceback():
    result = interrupted("")
    assert result.returncode != 0 and "Traceback" in result.stderr and "KeyboardInterrupt" in result.stderr


def test_the_language_hosts_code_for_a_message_already_shown():
    assert engine_stop.EXITED_AFTER_SHOWING_A_MESSAGE == 32  # pulumi-language-python v3.68.0, main.go


# A call to a real gRPC server that ends it with `code`, as the engine's resource monitor ends the
# registrations it still serves when an update fails; the error goes where the SDK sends it.
ENDED_CALL = """
from concurrent import futures
import grpc
from pulumi.runtime import settings
{install}
def end(request, context):
    context.abort(grpc.StatusCode.{code}, "context canceled")
server = grpc.server(futures.ThreadPoolExecutor(1))
handlers = {{"Register": grpc.unary_unary_rpc_method_handler(end)}}
server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("monitor", handlers)])
port = server.add_insecure_port("127.0.0.1:0")
server.start()
try:
    grpc.insecure_channel(f"127.0.0.1:{{port}}").unary_unary("/monitor/Register")(b"")
except grpc.RpcError as error:
    settings.handle_grpc_error(error)
"""


def ended_call(install: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENDED_CALL.format(install=install, code=code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_call_the_engine_cancelled_ends_the_program_without_a_word():
    result = ended_call(INSTALL, "CANCELLED")
    assert (result.returncode, result.stdout, result.stderr) == (engine_stop.EXITED_AFTER_SHOWING_A_MESSAGE, "", "")


def test_without_it_the_cancelled_call_is_the_exception_the_language_host_printed():
    result = ended_call("", "CANCELLED")
    assert result.returncode == 1 and result.stderr.endswith("Exception: context canceled\n"), result.stderr


def test_any_other_failed_call_is_still_the_sdks_exception():
    result = ended_call(INSTALL, "UNAVAILABLE")
    assert result.returncode == 1, result.stderr
    assert result.stderr.endswith("pulumi.errors.RunError: Resource monitor has terminated, shutting down\n")
