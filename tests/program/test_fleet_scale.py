"""A cluster stack at fleet scale under the mock engine: thousands of dynamic resources.

Every kubelet of a stack with a cluster has a NodeLifecycle, a Pulumi dynamic resource; the
SDK's provider serialization leaked one pickler wrapper per dynamic resource, so a stack of
about 1,000 kubelets failed with RecursionError (components/dynamic_resource.py). Completion
is what these tests check, never a time.
"""

from __future__ import annotations

import gc
import pickle
from typing import Any

import pulumi
from pulumi.dynamic import dynamic as sdk_dynamic

from bench.fleet import fleet_config
from components import heap
from components.dynamic_resource import PATCHED_PICKLER_METHODS, pickler_restored
from components.node_lifecycle import NodeLifecycleProvider
from tests.program.harness import run_program

LIFECYCLE = "pulumi-python:dynamic/numa-kubelets:NodeLifecycle"


def pickler_methods() -> dict[str, Any]:
    return {name: vars(pickle._Pickler)[name] for name in PATCHED_PICKLER_METHODS}  # type: ignore[attr-defined]


def test_a_cluster_stack_of_2000_kubelets_evaluates_and_leaves_the_pickler_as_it_was():
    before = pickler_methods()
    run = run_program(fleet_config(hosts=250, numa_nodes=8, cluster=True, demo=False))
    assert len(run.of_type(LIFECYCLE)) == 2000
    assert len(run.outputs["hosts"]) == 250
    assert pickler_methods() == before
    # Pickling a dict, which recursed once per dynamic resource made before, still works.
    assert pickle.loads(pickle._dumps({"b": 1, "a": {"c": 2}})) == {"b": 1, "a": {"c": 2}}  # type: ignore[attr-defined]


def test_the_sdk_serializer_leaks_a_wrapper_per_call_and_pickler_restored_takes_it_back():
    """The SDK's behaviour the fix exists for (a regression guard: should the SDK fix it, the
    first assertion says so and the workaround can go), then the fix undoing it."""
    before = pickler_methods()
    try:
        sdk_dynamic.serialize_provider(NodeLifecycleProvider())
        assert pickler_methods() != before, "serialize_provider no longer patches the pickler"
    finally:
        for name, method in before.items():
            setattr(pickle._Pickler, name, method)  # type: ignore[attr-defined]
    for _ in range(3000):
        with pickler_restored():
            sdk_dynamic.serialize_provider(NodeLifecycleProvider())
    assert pickler_methods() == before


def test_the_serialized_provider_is_the_one_the_sdk_makes_on_a_fresh_pickler():
    """Restoring the pickler changes nothing in what reaches the state (no diff on upgrade)."""
    with pickler_restored():
        first = sdk_dynamic.serialize_provider(NodeLifecycleProvider())
    for _ in range(50):
        with pickler_restored():
            again = sdk_dynamic.serialize_provider(NodeLifecycleProvider())
        assert again == first


def test_a_failing_construction_also_restores_the_pickler():
    before = pickler_methods()
    try:
        with pickler_restored():
            sdk_dynamic.serialize_provider(NodeLifecycleProvider())
            raise pulumi.RunError("construction failed")
    except pulumi.RunError:
        pass
    assert pickler_methods() == before


def test_the_program_freezes_what_it_built_and_the_harness_releases_it(monkeypatch):
    """components/heap.py: the program's objects go to the GC's permanent generation once the
    body has run, and what survives a full collection during the registration joins them; the
    harness, which evaluates the program again and again, releases both."""
    frozen_at_end: list[int] = []
    callbacks_at_end: list[list] = []
    unfreeze = gc.unfreeze

    def recording_unfreeze() -> None:
        frozen_at_end.append(gc.get_freeze_count())
        callbacks_at_end.append(list(gc.callbacks))
        unfreeze()

    monkeypatch.setattr(gc, "unfreeze", recording_unfreeze)
    callbacks_before = list(gc.callbacks)
    run = run_program(fleet_config(hosts=2, numa_nodes=2, cluster=True, demo=False))
    assert len(run.of_type(LIFECYCLE)) == 4
    assert frozen_at_end and frozen_at_end[0] > 10_000  # config, plan, components, resources, outputs
    assert gc.get_freeze_count() == 0
    assert heap._freeze_survivors not in callbacks_at_end[0], "the callback goes before the unfreeze"
    assert gc.callbacks == callbacks_before


def test_survivors_of_a_full_collection_are_frozen_while_the_program_runs():
    heap.freeze_survivors_of_full_collections()
    try:
        frozen_before = gc.get_freeze_count()
        kept = [[index] for index in range(10_000)]
        gc.collect(1)
        assert gc.get_freeze_count() - frozen_before < len(kept), "a younger collection freezes nothing"
        gc.collect()
        assert gc.get_freeze_count() - frozen_before >= len(kept)
    finally:
        heap.release()
    assert gc.get_freeze_count() == 0 and heap._freeze_survivors not in gc.callbacks
