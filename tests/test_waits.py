"""The no-JSPI browser path, natively: runtimes that answer through Waits (waits.py), driven by
pyodide_app.browser.run_chat under asyncio, must give exactly the tokens of the synchronous engine,
and a runtime failure must surface where the runtime was called."""

from __future__ import annotations

import asyncio
import json

import pytest

from pyodide_app.browser import run_chat
from pyodide_app.native.loader import load_engine
from pyodide_app.waits import Wait, finish, settle, wait_for


async def _later(value):
    await asyncio.sleep(0)  # really suspend: the driver must resume the generator afterwards
    if isinstance(value, BaseException):
        raise value
    return value


class AsyncChampionRuntime:
    """The synchronous champion.onnx runtime, answering like onnxruntime-web does in the browser."""

    def __init__(self, inner):
        self.inner = inner
        self.vocab_size = inner.vocab_size
        self.waits = 0

    @property
    def cached(self):
        return self.inner.cached

    def truncate(self, length):
        self.inner.truncate(length)

    def run(self, tokens):
        self.waits += 1
        rows = yield from wait_for(_later(self.inner.run(tokens)))
        return rows


class AsyncDraftRuntime:
    def __init__(self, inner, fail_at: int | None = None):
        self.inner = inner
        self.vocab_size = inner.vocab_size
        self.steps = 0
        self.fail_at = fail_at

    @property
    def cached(self):
        return self.inner.cached

    def truncate(self, length):
        self.inner.truncate(length)

    def reset(self):
        self.inner.reset()

    def step(self, tokens, temperature, uniform):
        self.steps += 1
        outcome = (
            RuntimeError("onnxruntime-web: session run failed")
            if self.steps == self.fail_at
            else self.inner.step(tokens, temperature, uniform)
        )
        result = yield from wait_for(_later(outcome))
        return result


class State:
    cancelled = False


def drive(engine, request: dict) -> list[dict]:
    events: list[dict] = []
    asyncio.run(run_chat(engine, json.dumps(request), lambda text: events.append(json.loads(text)), State()))
    return events


def chat_request(proposer: str, temperature: float, seed: int = 7) -> dict:
    return {
        "messages": [{"role": "user", "content": "hello world, hello world"}],
        "max_tokens": 24,
        "temperature": temperature,
        "seed": seed,
        "speculative": {"proposer": proposer, "k": 0 if proposer == "none" else 3},
    }


def test_finish_and_settle():
    assert finish(5) == 5

    def no_waits():
        yield from settle(2)
        return 3

    assert finish(no_waits()) == 3

    def one_wait():
        value = yield from wait_for(None)
        return value

    with pytest.raises(RuntimeError, match="synchronous caller"):
        finish(one_wait())


@pytest.fixture(scope="module")
def engines(synth_package):
    sync = load_engine(synth_package, context_limit=256, backend="cpu")
    asynchronous = load_engine(synth_package, context_limit=256, backend="cpu")
    asynchronous.champion.runtime = AsyncChampionRuntime(asynchronous.champion.runtime)
    asynchronous.draft_runtime = AsyncDraftRuntime(asynchronous.draft_runtime)
    return sync, asynchronous


@pytest.mark.parametrize("proposer", ["none", "prompt_lookup", "neural", "hybrid"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_async_driver_gives_the_synchronous_tokens(engines, proposer, temperature):
    sync, asynchronous = engines
    expected = list(sync.chat(chat_request(proposer, temperature)))[-1]
    waits_before = asynchronous.champion.runtime.waits
    events = drive(asynchronous, chat_request(proposer, temperature))
    done = events[-1]
    assert (
        done["type"] == "done"
        and done["tokens"] == expected["tokens"]
        and done["finish_reason"] == expected["finish_reason"]
    )
    for result in (done, expected):  # speculation really ran on both drivers
        assert result["speculative"]["fallback_code"] is None, result["speculative"]
        assert result["speculative"]["proposed"] > 0 or proposer in ("none", "prompt_lookup")
    assert done["speculative"]["proposed"] == expected["speculative"]["proposed"]
    assert "".join(e["text"] for e in events if e["type"] == "delta") == done["text"]
    assert asynchronous.champion.runtime.waits > waits_before  # the champion really went through Waits


def test_a_failed_wait_is_raised_at_the_runtime_and_handled_by_the_failure_rule(synth_package):
    sync = load_engine(synth_package, context_limit=256, backend="cpu")
    expected = list(sync.chat(chat_request("neural", 0.0)))[-1]
    engine = load_engine(synth_package, context_limit=256, backend="cpu")
    engine.champion.runtime = AsyncChampionRuntime(engine.champion.runtime)
    engine.draft_runtime = AsyncDraftRuntime(engine.draft_runtime, fail_at=1)  # fails before the first token
    done = drive(engine, chat_request("neural", 0.0))[-1]
    assert done["tokens"] == expected["tokens"]  # silent champion-alone fallback: same answer
    assert done["speculative"]["fallback_code"] == "DRAFT_RUNTIME"


def test_a_wait_the_driver_never_settled_is_an_error():
    def leaf():
        return (yield from wait_for(None))

    steps = leaf()
    assert isinstance(next(steps), Wait)
    with pytest.raises(RuntimeError, match="before the driver settled"):
        next(steps)
