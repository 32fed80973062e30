"""The embeddable API (web/spec-chat.js) as another page of the origin uses it: the minimal example page
loads an engine; the tests call it as a developer would, from the page's own JavaScript (App.evaluate:
Playwright, or WebDriver's async script in WebKitGTK), against the native engine's tokens (synthetic model)."""

from __future__ import annotations

import time

import pytest

from .conftest import ALL_ENGINES, GPU_ENGINES, open_app
from .native import native_done

CHECKS = ["batch_invariance", "golden_greedy", "philox", "verify_fixtures"]

PROMPT = "hello world"
REQUEST = {"max_tokens": 16, "temperature": 0, "seed": 0, "speculative": {"proposer": "prompt_lookup", "k": 4}}

STREAM = """async (params) => {
  const chunks = [];
  for await (const chunk of await window.specChatEngine.chat.completions.create({ ...params, stream: true })) {
    chunks.push(chunk);
  }
  return chunks;
}"""

ERROR_CODE = """async (params) => {
  try { await window.specChatEngine.chat.completions.create(params); return "no error"; }
  catch (error) { return `${error.name}:${error.code}`; }
}"""

CREATE = """async (options) => {
  const api = await import("/spec-chat.js");
  try { window.specChatEngine = await api.createEngine(options ?? {}); return "ok"; }
  catch (error) { return error.code; }
}"""

ABORT = """async () => {
  const controller = new AbortController();
  const seen = [];
  try {
    const chunks = await window.specChatEngine.chat.completions.create({
      messages: [{ role: "user", content: "hello world" }], stream: true, max_tokens: 400, temperature: 0,
      signal: controller.signal,
    });
    for await (const chunk of chunks) {
      seen.push(chunk.choices[0].delta.content ?? "");
      if (seen.join("")) controller.abort();
    }
    return { outcome: "finished", seen };
  } catch (error) {
    return { outcome: error.name, seen };
  }
}"""


@pytest.mark.parametrize("engine", ALL_ENGINES)
def test_the_api_streams_the_native_tokens_and_refuses_bad_calls(
    playwright_instance, site_url, synth_package, artifacts, engine
):
    """Chromium and Firefox on WebGPU (columns kernels); WebKitGTK on its CPU path (the float32 champion)."""
    on_gpu = engine in GPU_ENGINES
    expected = native_done(
        synth_package,
        backend="webgpu" if on_gpu else "cpu",
        prompt=PROMPT,
        proposer="prompt_lookup",
        k=4,
        temperature=0,
        seed=0,
        max_tokens=16,
    )
    with open_app(playwright_instance, engine, site_url + "examples/minimal.html") as app:
        deadline = time.monotonic() + 600
        while not app.text("#status").startswith("Ready"):
            assert time.monotonic() < deadline, app.text("#status")
            time.sleep(0.2)
        page = app  # page.evaluate: the developer's own script on the page, in every engine
        assert page.evaluate(CREATE) == "ENGINE_EXISTS", "one engine per page"
        page.evaluate("() => window.specChatEngine.unload()")  # then one with the kernels the native reference runs
        assert page.evaluate(ERROR_CODE, {"messages": [{"role": "user", "content": "hi"}]}) == "SpecChatError:UNLOADED"
        assert page.evaluate(CREATE, {"kernels": "columns"}) == "ok"
        info = page.evaluate("() => window.specChatEngine.info()")
        assert info["limits"]["context"] == 512, info
        if on_gpu:
            assert info["backend"] == "WebGPU" and info["kernel_variant"] == "columns", info
        else:
            assert info["backend"] == "CPU fallback" and info["kernel_variant"] is None, info
        params = {"messages": [{"role": "user", "content": PROMPT}], **REQUEST}

        chunks = page.evaluate(STREAM, params)
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert all(c["object"] == "chat.completion.chunk" and len({c["id"] for c in chunks}) == 1 for c in chunks)
        last = chunks[-1]
        assert last["choices"][0]["finish_reason"] == "length" and last["usage"]["completion_tokens"] == 16
        assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        assert last["speculative"]["tokens"] == expected["tokens"] and text == expected["text"]
        assert last["speculative"]["proposer"] == "prompt_lookup" and last["speculative"]["seed"] == 0

        whole = page.evaluate("(p) => window.specChatEngine.chat.completions.create(p)", params)
        assert whole["object"] == "chat.completion" and whole["choices"][0]["message"]["content"] == expected["text"]

        aborted = page.evaluate(ABORT)
        assert aborted["outcome"] == "AbortError" and "".join(aborted["seen"]), aborted
        assert page.evaluate(STREAM, params)[-1]["speculative"]["tokens"] == expected["tokens"], "works after abort"

        for bad, code in (
            ({"messages": []}, "INVALID_SETTINGS"),
            ({"messages": [{"role": "robot", "content": "hi"}]}, "INVALID_SETTINGS"),
            ({**params, "temperature": -1}, "INVALID_SETTINGS"),
            ({**params, "max_tokens": 1.5}, "INVALID_SETTINGS"),
            ({**params, "speculative": {"proposer": "magic"}}, "INVALID_SETTINGS"),
            ({**params, "speculative": {"proposer": "prompt_lookup", "k": 99}}, "INVALID_SETTINGS"),  # the engine's
            ({"messages": [{"role": "user", "content": " ".join(map(str, range(400)))}]}, "PROMPT_TOO_LONG"),
        ):
            assert page.evaluate(ERROR_CODE, bad) == f"SpecChatError:{code}", bad

        report = page.evaluate("() => window.specChatEngine.selfTest()")
        print(f"\n[api] {engine} selfTest: {report['seconds']:.1f} s, {[c['detail'] for c in report['checks']]}")
        assert report["passed"] and [c["name"] for c in report["checks"]] == CHECKS, report
        assert report["backend"] == info["backend"] and report["kernel_variant"] == info["kernel_variant"]
        assert report["key"].startswith(f"{info['backend']}|")
        assert page.evaluate(STREAM, params)[-1]["speculative"]["tokens"] == expected["tokens"], (
            "works after the self-test"
        )

        app.screenshot(str(artifacts / f"api-{engine}-example.png"))
