"""components/engine_stop.py: the engine's SIGINT ends the program quietly; nothing else changes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from components import engine_stop

REPO = Path(__file__).resolve().parents[2]
# A program that waits (as one waiting on its resource registrations), with or without the handler.
WAITING = """
import sys, time
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
