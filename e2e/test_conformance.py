"""Conformance: the page produces the native engine's tokens whatever the proposer, k, engine.

Synthetic model, every engine x proposer x k in {1, 4}: greedy tokens equal the native WebGPU
engine's (the champion's argmax path); seeded temperature-1 samples equal the native engine of the
same champion backend (WGSL kernels for the WebGPU engines, champion.onnx for the CPU ones: same
Philox draws, same acceptance), and so do seeded temperature-0.8, top-p-0.9 ones.
Real model, Chromium and Firefox: greedy tokens equal the native engine's for every proposer, on two
prompts in Firefox and on the one that copies (lookup, neural and hybrid all draft there) in Chromium,
whose SwiftShader adapter took 9.4 of the suite's 75 minutes for both (the split family is also checked
natively on SmolLM2 in tests/test_gpu_champion.py). Each WebGPU browser runs one matmul kernel family (PAGE_KERNELS:
Chromium split, Firefox columns) against the native engine running the same family, so both families are
checked in a browser. Every comparison is written to test-results/ as JSON.
"""

from __future__ import annotations

import json

import pytest

from .conftest import ALL_ENGINES, GPU_ENGINES, open_app
from .native import PAGE_KERNELS, native_done, native_tokens

SYNTH_PROMPT = "hello world, the world says hello"
SEED = 1234
PROPOSER_CASES = [("none", 1), ("prompt_lookup", 1), ("prompt_lookup", 4), ("neural", 1), ("neural", 4), ("hybrid", 4)]
# Top-p below 1: the WebGPU kernel's nucleus, and on the CPU path web/row_processing.js's (not Python's).
NUCLEUS_CASES = [("prompt_lookup", 4, 0.8, 0.9), ("neural", 4, 0.8, 0.9)]
CPU_ENGINES = {"webkitgtk", "chromium-nogpu"}
REAL_PROMPTS = {
    "rewrite": "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.",
    "question": "What is the capital of France?",
}
REAL_PROMPT_ENGINES = {"rewrite": {"chromium", "firefox"}, "question": {"firefox"}}  # see the docstring
REAL_MAX_TOKENS = 12


def run_cases(app, model, backend: str, cases, prompt: str, max_tokens: int, kernels: str = "columns"):
    """Ask the prompt once per case in a fresh chat; returns rows of page vs native tokens (the native WebGPU
    engine with the matmul family the page runs)."""
    rows = []
    for proposer, k, temperature, *nucleus in cases:
        top_p = nucleus[0] if nucleus else 1
        app.new_chat()
        app.configure(
            proposer=proposer,
            k=k,
            temperature=temperature,
            seed=SEED,
            max_tokens=max_tokens,
            adaptive=False,
            top_p=top_p,
            top_k=0,
            repetition_penalty=1,
        )
        answer = app.ask(prompt)
        request = dict(prompt=prompt, proposer=proposer, k=k, temperature=temperature, seed=SEED)
        request.update(max_tokens=max_tokens, top_p=top_p)
        greedy_reference = native_tokens(model, "webgpu", kernels, **request) if temperature == 0 else None
        same_backend = native_done(model, backend, kernels, **request)
        rows.append(
            {
                "proposer": proposer,
                "k": k,
                "temperature": temperature,
                "top_p": top_p,
                "page": answer.tokens,
                "finish": answer.finish,
                "proposed": answer.proposed,
                "fallback": answer.fallback,
                "native_proposed": same_backend["speculative"]["proposed"],
                "native_same_backend": same_backend["tokens"],
                "native_webgpu": greedy_reference,
            }
        )
    return rows


def assert_speculation_ran(row, case: str, lookup_expected: bool) -> None:
    """An identity test proves nothing if speculation silently fell back to champion-alone: no fallback,
    the page proposed as many drafts as the native engine, and drafts were proposed where expected."""
    assert not row["fallback"], f"{case}: speculation fell back ({row['fallback']})"
    assert row["proposed"] == row["native_proposed"], (
        f"{case}: proposed {row['proposed']} drafts, native {row['native_proposed']}"
    )
    if row["proposer"] in ("neural", "hybrid") or (row["proposer"] == "prompt_lookup" and lookup_expected):
        assert row["proposed"] > 0, f"{case}: nothing was proposed"


def report(artifacts, name: str, engine: str, backend_text: str, rows) -> None:
    artifacts.mkdir(exist_ok=True)  # any other pytest session (pytest-playwright) empties test-results/ at its start
    (artifacts / f"conformance-{name}-{engine}.json").write_text(
        json.dumps({"backend": backend_text, "cases": rows}, indent=1)
    )


@pytest.mark.parametrize("engine", ALL_ENGINES + ["chromium-nogpu"])
def test_synthetic_model_every_proposer_and_k_matches_native(
    playwright_instance, site_url, synth_package, artifacts, engine
):
    cases = [(p, k, t) for t in (0.0, 1.0) for p, k in PROPOSER_CASES] + NUCLEUS_CASES
    kernels = PAGE_KERNELS.get(engine, "columns")
    with open_app(playwright_instance, engine, site_url + f"?nosw&backend=webgpu&kernels={kernels}") as app:
        backend_text = app.wait_ready()
        cpu = engine in CPU_ENGINES
        assert cpu or f"kernels: {kernels}" in backend_text, backend_text
        assert ("CPU fallback" in backend_text) == cpu, backend_text
        assert ("(float32)" in backend_text) == cpu, backend_text  # the fast CPU champion, weights from the shards
        rows = run_cases(app, synth_package, "cpu" if cpu else "webgpu", cases, SYNTH_PROMPT, 16, kernels)
    report(artifacts, "synth", engine, backend_text, rows)
    for row in rows:
        case = f"{engine} {row['proposer']} k={row['k']} T={row['temperature']} top-p={row['top_p']}"
        assert row["page"], f"{case}: empty answer ({row['finish']})"
        assert_speculation_ran(row, case, lookup_expected=False)
        if row["temperature"] == 0:
            assert row["page"] == row["native_webgpu"], f"{case}: greedy tokens differ from the native engine"
        assert row["page"] == row["native_same_backend"], (
            f"{case}: tokens differ from the native {('cpu' if engine in CPU_ENGINES else 'webgpu')} engine"
        )
    greedy = {tuple(r["page"]) for r in rows if r["temperature"] == 0}
    assert any(tuple(r["page"]) not in greedy for r in rows if r["temperature"] == 1.0), (
        "temperature 1 never left the greedy answer"
    )


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_real_model_greedy_tokens_match_native_for_every_proposer(
    playwright_instance, real_site_url, real_package, artifacts, engine
):
    cases = [("none", 4, 0.0), ("prompt_lookup", 4, 0.0), ("neural", 4, 0.0), ("hybrid", 4, 0.0)]
    kernels = PAGE_KERNELS[engine]
    with open_app(playwright_instance, engine, real_site_url + f"?nosw&backend=webgpu&kernels={kernels}") as app:
        backend_text = app.wait_ready()
        assert "WebGPU" in backend_text and f"kernels: {kernels}" in backend_text, backend_text
        rows = []
        for name, prompt in REAL_PROMPTS.items():
            if engine not in REAL_PROMPT_ENGINES[name]:
                continue
            for row in run_cases(app, real_package, "webgpu", cases, prompt, REAL_MAX_TOKENS, kernels):
                rows.append({"prompt": name, **row})
        app.screenshot(str(artifacts / f"conformance-real-{engine}.png"))
        if kernels == "columns":  # SmolLM2 on this browser's software adapter (the split family on SwiftShader
            checked = app.self_test()  # takes ~90 s; its self-test runs on the synthetic model in test_page.py)
            print(f"\n[conformance] {engine} self-test on SmolLM2: {checked.summary}")
            assert checked.passed, checked
    report(artifacts, "real", engine, backend_text, rows)
    assert rows and len(rows) == len(cases) * sum(engine in engines for engines in REAL_PROMPT_ENGINES.values()), rows
    for row in rows:
        case = f"{engine} {row['prompt']} {row['proposer']}"
        assert row["page"] == row["native_webgpu"], f"{case}: greedy tokens differ from the native engine"
        assert_speculation_ran(row, case, lookup_expected=row["prompt"] == "rewrite")
