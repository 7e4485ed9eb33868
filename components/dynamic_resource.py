"""The base of the program's Pulumi dynamic resources: constructing any number of them is safe,
and their errors reach the user as their message, not as a Python traceback.

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

The SDK's dynamic provider server (`python -m pulumi.dynamic`, pulumi 3.272.0) fails every
operation that raises with `context.abort(UNKNOWN, traceback.format_exc())`, and the engine shows
that text as the resource's error: every message would come with the frames of the provider
process. `plain_provider_errors()`, called by each of the program's providers in that process,
makes the server report a `ProviderError` as its message alone (any other exception, a bug,
keeps its traceback). It changes only the server module's reference to `traceback`, once.
"""

from __future__ import annotations

import pickle
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
from pulumi import dynamic

# The pure-Python pickler's methods that serialize_provider patches (on the class, so for everyone).
PATCHED_PICKLER_METHODS = ("_batch_setitems", "save_dict")
# The module the engine runs a Python dynamic provider in (`python -m pulumi.dynamic`).
DYNAMIC_PROVIDER_SERVER = "pulumi.dynamic.__main__"


class ProviderError(Exception):
    """A dynamic resource's failure meant for the user: one or a few lines naming the setting and
    the cause. The provider server reports it without a traceback (plain_provider_errors)."""


class _MessagesOfProviderErrors:
    """Stands in for the `traceback` module inside the SDK's provider server: `format_exc()` of a
    ProviderError is its message; everything else is the real module's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    @staticmethod
    def format_exc(limit: int | None = None, chain: bool = True) -> str:
        error = sys.exc_info()[1]
        if isinstance(error, ProviderError):
            return str(error)
        return traceback.format_exc(limit, chain)


def plain_provider_errors(modules: dict[str, Any] | None = None) -> bool:
    """In the engine's dynamic provider process, have its server report ProviderErrors as their
    message. Elsewhere (the program, tests) and under an SDK whose server looks otherwise, nothing
    changes. True when the server reports them so."""
    server = (sys.modules if modules is None else modules).get("__main__")
    spec = getattr(server, "__spec__", None)
    if getattr(spec, "name", None) != DYNAMIC_PROVIDER_SERVER:
        return False
    if not callable(getattr(server, "_abort_with_traceback", None)):
        return False  # another SDK: its own way of reporting
    if not isinstance(getattr(server, "traceback", None), _MessagesOfProviderErrors):
        server.traceback = _MessagesOfProviderErrors()  # type: ignore[union-attr]
    return True


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
