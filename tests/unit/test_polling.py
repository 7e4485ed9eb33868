"""tests/polling.py: the real-host tiers' samplers and step watches rest on it."""

from __future__ import annotations

import json
import threading

from tests.polling import Polling


def test_it_polls_while_the_block_runs_and_once_more_after_it() -> None:
    calls: list[int] = []
    polled_three_times = threading.Event()

    def poll() -> None:
        calls.append(len(calls))
        if len(calls) == 3:
            polled_three_times.set()

    with Polling(poll, 0.01, once_more=True):
        assert polled_three_times.wait(5)
    count = len(calls)
    assert count >= 4  # three or more in the block, one after it
    assert len(calls) == count  # stopped: no call after the block's end and the last one


def test_it_stops_polling_once_poll_returns_true() -> None:
    calls: list[int] = []
    done = threading.Event()

    def poll() -> bool:
        calls.append(1)
        if len(calls) == 2:
            done.set()
            return True
        return False

    with Polling(poll, 0.01) as polling:
        assert done.wait(5)
        polling._thread.join(5)
        assert not polling._thread.is_alive()
    assert len(calls) == 2  # not called again, nor after the block (no once_more)


def test_the_step_watch_acts_once_when_the_engine_starts_a_step_on_a_watched_resource(tmp_path) -> None:
    from tests.realengine.engine import step_watch

    log = tmp_path / "events.jsonl"
    acted: list[str] = []
    acted_once = threading.Event()

    def action(name: str) -> None:
        acted.append(name)
        acted_once.set()

    def pre_event(name: str, op: str) -> str:
        urn = f"urn:pulumi:s::p::command:remote:Command::{name}"
        return json.dumps({"resourcePreEvent": {"metadata": {"urn": urn, "op": op}}}) + "\n"

    with step_watch(log, ("numa-a-numa0-kubelet", "numa-a-numa1-kubelet"), action):
        log.write_text(pre_event("numa-a-numa1-kubelet", "same") + pre_event("numa-a-numa0-slice", "update"))
        assert not acted_once.wait(0.5)  # an unchanged step and another resource: nothing yet
        with log.open("a") as events:
            events.write(pre_event("numa-a-numa1-kubelet", "update") + pre_event("numa-a-numa0-kubelet", "update"))
        assert acted_once.wait(5)
    # Once, for whichever started step it read first.
    assert len(acted) == 1 and acted[0] in {"numa-a-numa0-kubelet", "numa-a-numa1-kubelet"}, acted
