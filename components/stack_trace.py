"""The stack trace the Pulumi SDK sends with every resource, captured at a fraction of its cost.

For each resource it registers, the SDK (`pulumi.runtime.resource._get_stack_trace`, pulumi
3.272.0) runs `traceback.extract_stack()`, which stats every frame's file and reads its source
line through linecache, then turns each frame's file name into a URI with `pathlib` and builds
two protobuf messages per frame. The program builds its resources deep inside nested
components, so that was measured at about 30 % of an evaluation without the cyclic GC at
100 hosts x 8 NUMA nodes (bench/README.md). `stack_trace()` returns the same message, frame
for frame, by walking the frames itself and computing each file's URI once.
`tests/unit/test_stack_trace.py` compares the two on every stack shape the SDK tells apart, so
an SDK release that changes its rule fails there first.
"""

from __future__ import annotations

import functools
import pathlib
import sys
from types import FrameType

from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import source_pb2

SDK_STACK_TRACE = sdk_resource._get_stack_trace
# The SDK skips the frames inside the resource's constructors: Resource's, CustomResource's or
# ComponentResource's, and the concrete class's (its rule: the third `__init__` from the top).
CONSTRUCTOR_FRAMES = 3


@functools.cache
def _file_uri(filename: str) -> str | None:
    if filename == "":
        return None
    try:
        return pathlib.Path(filename).as_uri()
    except BaseException:  # the SDK's rule: no position for a name it cannot convert
        return None


def _rpc_frame(frame: FrameType) -> source_pb2.StackFrame:
    uri = _file_uri(frame.f_code.co_filename)
    if uri is None or frame.f_lineno is None:
        return source_pb2.StackFrame()
    return source_pb2.StackFrame(pc=source_pb2.SourcePosition(uri=uri, line=frame.f_lineno))


def stack_trace() -> source_pb2.StackTrace:
    """What `SDK_STACK_TRACE()` returns when called from the same place."""
    # Innermost first, from this function's own frame as the SDK's capture starts from its own.
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe(0)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    limit = getattr(sys, "tracebacklimit", None)
    if limit is not None:
        # extract_stack keeps that many innermost frames (none when negative; the SDK then fails).
        frames = frames[: max(limit, 0)]
    constructors = [index for index, frame in enumerate(frames) if frame.f_code.co_name == "__init__"]
    if len(constructors) < CONSTRUCTOR_FRAMES:
        return source_pb2.StackTrace()
    outermost_constructor = constructors[CONSTRUCTOR_FRAMES - 1]
    return source_pb2.StackTrace(frames=[_rpc_frame(caller) for caller in frames[outermost_constructor + 1 :]])


def install() -> None:
    """From now on the SDK registers resources with `stack_trace()`."""
    sdk_resource._get_stack_trace = stack_trace
