"""components/stack_trace.py returns what the SDK's own stack capture returns, from the same place."""

from __future__ import annotations

import sys

import pytest
from pulumi.runtime.proto import source_pb2

from components import stack_trace


class Captured:
    """Calls both captures from inside `depth` nested constructors, as the SDK does from Resource's."""

    def __init__(self) -> None:
        self.sdk = stack_trace.SDK_STACK_TRACE()
        self.fast = stack_trace.stack_trace()


class CustomLike(Captured):
    def __init__(self) -> None:
        super().__init__()


class Concrete(CustomLike):
    def __init__(self) -> None:
        super().__init__()


class Component:
    """A component that builds its resource in its own constructor, as NumaSlice does."""

    def __init__(self, build) -> None:
        self.resource = build()


def nested(levels: int, build):
    if levels == 0:
        return build()
    return nested(levels - 1, build)


def frames_of(trace: source_pb2.StackTrace) -> list[tuple[str, int]]:
    return [(frame.pc.uri, frame.pc.line) for frame in trace.frames]


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: Concrete(), id="a resource built directly"),
        pytest.param(lambda: nested(12, Concrete), id="a resource built 12 calls deep"),
        pytest.param(lambda: Component(Concrete).resource, id="a resource built inside a component"),
        pytest.param(lambda: [Concrete() for _ in range(2)][1], id="a resource built in a comprehension"),
        pytest.param(lambda: Component(lambda: Component(Concrete).resource).resource, id="components nested"),
    ],
)
def test_the_frames_outside_the_constructors_are_the_sdks(build):
    captured = build()
    assert captured.fast == captured.sdk
    assert len(captured.fast.frames) > 0
    # The innermost frame is the caller of the concrete class: this module, at the constructing line.
    assert frames_of(captured.fast)[0][0].endswith("/tests/unit/test_stack_trace.py")


def test_fewer_than_three_constructors_give_an_empty_trace_as_in_the_sdk():
    for built in (Captured(), CustomLike()):
        assert built.fast == built.sdk == source_pb2.StackTrace()


def test_frames_without_a_file_uri_are_empty_frames_as_in_the_sdk():
    """A relative file name (such as "<string>") has no file URI: the SDK sends an empty frame."""
    namespace = {"Concrete": Concrete}
    exec(compile("def build():\n    return Concrete()\n", "<generated>", "exec"), namespace)
    captured = namespace["build"]()
    assert captured.fast == captured.sdk
    assert source_pb2.StackFrame() in captured.fast.frames


@pytest.mark.parametrize("limit", [6, 2])
def test_a_traceback_limit_is_honoured_as_in_the_sdk(monkeypatch, limit):
    monkeypatch.setattr(sys, "tracebacklimit", limit, raising=False)
    captured = nested(10, Concrete)
    assert captured.fast == captured.sdk


def test_install_makes_the_sdk_register_with_it(monkeypatch):
    from pulumi.runtime import resource as sdk_resource

    monkeypatch.setattr(sdk_resource, "_get_stack_trace", stack_trace.SDK_STACK_TRACE)
    stack_trace.install()
    assert sdk_resource._get_stack_trace is stack_trace.stack_trace
