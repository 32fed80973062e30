"""Waiting on the host without blocking Python (the browser path that needs no JSPI).

In the browser, onnxruntime-web answers with JS promises. Without JSPI, Python cannot block on a
promise, so a runtime that must wait *yields* a `Wait` instead of returning; every caller up the
chain delegates with `value = yield from settle(call(...))`, and the driver at the top
(pyodide_app.browser.run_chat, an async function) awaits the promise, stores the outcome on the
Wait and resumes the generator. Natively nothing ever yields a Wait, so `settle` just returns the
value and the orchestrator's generators run straight through.

Steps[T] below means: a T, or a generator that yields Waits and returns a T.
"""

from __future__ import annotations

from types import GeneratorType
from typing import Any, Generator, TypeVar, Union

T = TypeVar("T")
Steps = Union[T, Generator["Wait", None, T]]


class Wait:
    """One pending host operation. The driver sets exactly one of `result` / `error`."""

    __slots__ = ("awaitable", "result", "error", "done")

    def __init__(self, awaitable: Any):
        self.awaitable = awaitable
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False

    def resolve(self, result: Any) -> None:
        self.result, self.done = result, True

    def fail(self, error: BaseException) -> None:
        self.error, self.done = error, True


def wait_for(awaitable: Any) -> Generator[Wait, None, Any]:
    """`result = yield from wait_for(promise)`: the failure, if any, is raised here, at the caller."""
    wait = Wait(awaitable)
    yield wait
    if not wait.done:
        raise RuntimeError("a Wait was resumed before the driver settled it")
    if wait.error is not None:
        raise wait.error
    return wait.result


def settle(value: Steps[T]) -> Generator[Wait, None, T]:
    """`x = yield from settle(maybe_steps)`: the return value of a generator, or the value itself."""
    if isinstance(value, GeneratorType):
        return (yield from value)
    return value


def finish(value: Steps[T]) -> T:
    """Run Steps on this stack. A Wait here means an async runtime was driven synchronously: an error."""
    if not isinstance(value, GeneratorType):
        return value
    try:
        item = next(value)
    except StopIteration as done:
        return done.value
    value.close()
    raise RuntimeError(f"a host wait ({item!r}) reached a synchronous caller; drive it with an async driver")
