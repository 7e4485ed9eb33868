"""A `with` block that polls something on a thread while it runs (what the API says during an
update, the engine's event log): one shape for the real-host tiers' samplers and watches."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self


class Polling:
    """Calls `poll` every `interval` seconds while the block runs, until `poll` returns True; with
    `once_more`, once more after the block (a sample of the state the block left)."""

    def __init__(self, poll: Callable[[], bool | None], interval: float, *, once_more: bool = False) -> None:
        self.poll, self.interval, self.once_more = poll, interval, once_more
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.poll():
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        if self.once_more:
            self.poll()
