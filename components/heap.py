"""Keeps what the program has built out of the cyclic garbage collector's way."""

import gc
from typing import Any


def freeze_constructed_objects() -> None:
    """Called as the program body goes (after the plan, after each host, at the end).

    Everything built so far (configuration, plan, rendered scripts, components, resources and
    their outputs) lives until the run ends; Python's cyclic GC would scan it again at every
    full collection while the engine registers the resources, which measured about 45 % of an
    evaluation at 4,000 kubelets (bench/README.md). `gc.freeze()` moves it to the permanent
    generation: nothing of it is freed early or late (it was all reachable), and what the SDK
    allocates from now on is collected as usual. A process that evaluates the program more than
    once (the tests' harness) must call `release()` after each run. Each call is cheap: it
    moves the collector's generation lists, it does not walk them.
    """
    gc.freeze()


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


def freeze_survivors_of_full_collections() -> None:
    """From now on, what a full collection leaves alive is frozen as well.

    The SDK's registration of the resources runs after the body and allocates (requests,
    futures, outputs) in proportion to the fleet; every full collection would scan all of it
    again. What survives one is nearly all alive until the run ends; a cycle that becomes
    garbage later is kept (freed at exit), which the peak RSS in bench/README.md includes.
    """
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)


def release() -> None:
    """For a process that evaluates the program again and again: the GC as it was before."""
    if _freeze_survivors in gc.callbacks:
        gc.callbacks.remove(_freeze_survivors)
    gc.unfreeze()
