"""`Client` and `AsyncClient` offer the same public methods with the same arguments: what one
can do blocking, the other can do awaiting."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from pomoview.client import AsyncClient, Client

# The only allowed differences: the context-manager protocol, blocking on one side and
# asyncio's on the other. Each pair must still take the same arguments.
CONTEXT_MANAGERS = {"__enter__": "__aenter__", "__exit__": "__aexit__"}
# Streams: the sync method returns an iterator, the async one an async iterator (called
# without await, used with `async for`); each pair still takes the same arguments.
STREAMS = {"subscribe": ("Subscription", "AsyncSubscription")}


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The class's public callables, and its constructor (both clients take the same)."""
    methods = {
        name: member
        for name, member in inspect.getmembers(cls, callable)
        if not name.startswith("_")
    }
    methods["__init__"] = cls.__init__
    return methods


def shape(fn: Callable[..., Any]) -> list[tuple[str, str, object, object]]:
    """Each parameter's name, kind, default and annotation (as written: both modules use
    `from __future__ import annotations`, so these are strings to compare as text)."""
    return [
        (p.name, p.kind.name, p.default, p.annotation)
        for p in inspect.signature(fn).parameters.values()
    ]


def test_both_clients_have_the_same_public_methods() -> None:
    sync, aio = public_methods(Client), public_methods(AsyncClient)
    assert sorted(sync) == sorted(aio), (
        f"only on Client: {sorted(set(sync) - set(aio))}; "
        f"only on AsyncClient: {sorted(set(aio) - set(sync))}"
    )


def test_each_method_takes_the_same_arguments_on_both() -> None:
    sync, aio = public_methods(Client), public_methods(AsyncClient)
    for name in sorted(set(sync) & set(aio)):
        assert shape(sync[name]) == shape(aio[name]), name


def test_each_method_returns_the_same_type_on_both() -> None:
    sync, aio = public_methods(Client), public_methods(AsyncClient)
    for name in sorted(set(sync) & set(aio) - set(STREAMS)):
        sync_returns = inspect.signature(sync[name]).return_annotation
        assert sync_returns == inspect.signature(aio[name]).return_annotation, name


def test_async_methods_are_coroutines_and_sync_ones_are_not() -> None:
    for name, fn in public_methods(AsyncClient).items():
        if name != "__init__" and name not in STREAMS:
            assert inspect.iscoroutinefunction(fn), f"AsyncClient.{name} is not async"
    for name, fn in public_methods(Client).items():
        assert not inspect.iscoroutinefunction(fn), f"Client.{name} is async"


def test_streams_are_an_iterator_and_an_async_iterator() -> None:
    import pomoview.client as client

    for name, (sync_type, aio_type) in STREAMS.items():
        sync_fn, aio_fn = getattr(Client, name), getattr(AsyncClient, name)
        assert inspect.signature(sync_fn).return_annotation == sync_type, name
        assert inspect.signature(aio_fn).return_annotation == aio_type, name
        assert not inspect.iscoroutinefunction(aio_fn), f"AsyncClient.{name} is awaited, not iterated"
        sync_cls, aio_cls = getattr(client, sync_type), getattr(client, aio_type)
        assert hasattr(sync_cls, "__next__") and hasattr(sync_cls, "close")
        assert hasattr(aio_cls, "__anext__") and hasattr(aio_cls, "close")
        assert hasattr(aio_cls, "__aenter__") and hasattr(sync_cls, "__enter__")


def test_context_managers_correspond() -> None:
    for sync_name, aio_name in CONTEXT_MANAGERS.items():
        sync_fn, aio_fn = getattr(Client, sync_name), getattr(AsyncClient, aio_name)
        assert shape(sync_fn) == shape(aio_fn), (sync_name, aio_name)
        assert inspect.iscoroutinefunction(aio_fn) and not inspect.iscoroutinefunction(sync_fn)
    # Neither side has the other's protocol, half-implemented.
    assert not hasattr(Client, "__aenter__") and not hasattr(AsyncClient, "__enter__")


def test_both_clients_have_the_same_public_attributes() -> None:
    sync = Client("127.0.0.1:1")  # channels connect lazily: nothing is dialled
    sync.close()

    async def make() -> set[str]:
        aio = AsyncClient("127.0.0.1:1")  # grpc.aio binds a channel to the running loop
        await aio.close()
        return {name for name in vars(aio) if not name.startswith("_")}

    assert {name for name in vars(sync) if not name.startswith("_")} == asyncio.run(make())
