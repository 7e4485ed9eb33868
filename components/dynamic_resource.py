"""The base of the program's Pulumi dynamic resources: constructing any number of them is safe.

Every dynamic resource's construction runs the SDK's `pulumi.dynamic.dynamic.serialize_provider`
(pulumi 3.272.0, the newest the registry serves), which, to pickle dicts in sorted order,
replaces `pickle._Pickler._batch_setitems` with a sorting wrapper around the current one and
`pickle._Pickler.save_dict`, and never puts them back (its `finally` restores only the name
`pickle.Pickler`). Each construction so wraps the previous wrapper: after about 970 dynamic
resources in one program any pickling of a dict recurses that deep and raises RecursionError
(pulumi/pulumi#17803). One NodeLifecycle per kubelet hits that at about 1,000 kubelets.

`pickler_restored()` puts the pickler's own methods back after each construction, so every
serialization wraps the original method exactly once and sorts exactly as the SDK intends
(the serialized provider, and so the preview diff, is unchanged). It is harmless once the SDK
restores them itself.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
from pulumi import dynamic

# The pure-Python pickler's methods that serialize_provider patches (on the class, so for everyone).
PATCHED_PICKLER_METHODS = ("_batch_setitems", "save_dict")


@contextmanager
def pickler_restored() -> Iterator[None]:
    """Run the body, then give `pickle._Pickler` back the methods it had before it."""
    pickler_class: Any = pickle._Pickler
    saved = {name: vars(pickler_class)[name] for name in PATCHED_PICKLER_METHODS}
    try:
        yield
    finally:
        for name, method in saved.items():
            setattr(pickler_class, name, method)


class SafeDynamicResource(dynamic.Resource):
    """A dynamic resource whose construction leaves the pickler as it found it."""

    def __init__(
        self,
        provider: dynamic.ResourceProvider,
        name: str,
        props: dict[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        with pickler_restored():
            super().__init__(provider, name, props, opts)
