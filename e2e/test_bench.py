"""`build_tools bench` end to end on the synthetic model in Firefox, in a tiny configuration: every
arm runs, the summary and plots are written, and the greedy peers decode the champion's tokens."""

from __future__ import annotations

import json

from build_tools.bench import SEED
from build_tools.gguf_source import default_champion_path
from tests.conftest import run_build_tools


def run_bench(synth_package, out, *options: str) -> dict:
    """`build_tools bench` on the synthetic package with 8-token answers -> its bench.json. A hung arm fails the run
    in minutes, naming itself (--call-timeout 240)."""
    result = run_build_tools(
        "bench",
        "--model",
        str(synth_package),
        "--out",
        str(out),
        "--max-tokens",
        "8",
        "--call-timeout",
        "240",
        *options,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((out / "bench.json").read_text())


def test_bench_command_writes_results_and_plots(synth_package, tmp_path):
    out = tmp_path / "bench"
    # The llama.cpp peer runs the real SmolLM2 GGUF: wllama 3.8.1 fails ("out-of-bounds Uint8Array") streaming the
    # synthetic model's byte-garbage tokens. Its speed, not its agreement, is what this test can check.
    bench = run_bench(
        synth_package,
        out,
        *("--prompts", "1", "--sampled-prompts", "1", "--strata", "chat,repetitive", "--kernel-repeats", "1"),
        *("--peer-gguf", str(default_champion_path()), "--backend", "webgpu"),  # the kernel sweep needs WebGPU
    )
    arms = {a["name"] for a in bench["arms"]}
    assert {
        "none",
        "lookup-k2",
        "lookup-k4",
        "lookup-k8",
        "lookup-adaptive",
        "neural-k2",
        "neural-k4",
        "neural-adaptive",
        "hybrid-k4",
        "auto",
        "ort-wasm",
        "ort-webgpu",
        "wllama-1t",
        "wllama-2t",
    } <= arms
    for setting in ("greedy", "sampled"):  # measured per kind of sampling, before the arms
        auto = bench["auto"][setting]
        assert auto["policy_version"] >= 2 and len(auto["costs"]["verify_ms"]) == 9, auto
    # A read row's processing, measured per kind (on this synthetic model's 373-entry rows it can time as 0:
    # the order of the two is the real model's, not this one's).
    assert all(bench["auto"][s]["measured_costs"]["row_ms"] >= 0 for s in ("greedy", "sampled"))
    assert all(" on " in r["auto_chose"] for r in bench["records"] if r["arm"] == "auto")  # what auto did, per answer
    errors = [(r["arm"], r["setting"], r["stratum"], r["error"]) for r in bench["records"] if "error" in r]
    assert not errors, errors
    greedy = {
        (r["arm"], r["prompt"]): r["tokens"] for r in bench["records"] if r["setting"] == "greedy" and "tokens" in r
    }
    for (arm, prompt), tokens in greedy.items():
        n = len(tokens)  # ort-webgpu decodes fewer tokens (SLOW_PEER_TOKENS)
        assert tokens == greedy[("none", prompt)][:n], f"{arm} changed the greedy answer to {prompt!r}"
    assert sum(1 for r in bench["records"] if r["arm"] == "ort-webgpu") == 1
    wllama = [r for r in bench["records"] if r["arm"].startswith("wllama")]
    assert wllama and all(r["n_tokens"] > 1 and r["isolated"] for r in wllama)  # 2 threads need cross-origin isolation
    overall = [r for r in bench["summary"] if r["stratum"].startswith("all") and r["setting"] == "greedy"]
    assert {r["arm"] for r in overall} == arms
    assert all(r["decode_tps"] and r["decode_tps"] > 0 for r in overall)
    assert next(r for r in overall if r["arm"] == "none")["speedup_vs_none"] == 1.0
    assert [k["rows"] for k in bench["kernel"]] == list(range(1, 10))
    for rows in ("1", "5"):  # the page's profile by kernel kind (JSON keys are strings)
        kinds = bench["kernel_profile_ms"][rows]
        assert {"matmul", "attention", "lm head", "verify", "forward + verify"} <= set(kinds), kinds
        assert kinds["matmul"]["dispatches"] > 0 and kinds["forward + verify"]["ms"] > 0
    assert (
        bench["load"]["warm"]["model_files_from_cache"] == bench["load"]["warm"]["model_files"]
    )  # the second load is warm
    assert set(bench["memory_bytes"]) == {"weights", "kv", "scratch", "draft"}
    for plot in ("survival", "waterfall", "speedup_cdf", "break_even", "heatmap", "memory_latency"):
        assert (out / f"{plot}.png").stat().st_size > 5_000
    written = (out / "table.md").read_text()
    assert "| greedy | all (excl. repetitive) | none |" in written
    assert "## auto's bars" in written and "greedy: auto >= 0.97x none on " in written  # bench_stats.auto_bars


def test_bench_keep_prompt_kv_decodes_later_rounds_from_the_cached_prompt(synth_package, tmp_path):
    """--keep-prompt-kv: round 0 prefills every arm's prompt (its TTFT is measured); later rounds start from the
    page's cached rows of the same prompt (usage.cached_prompt_tokens, through the worker's forget call), give
    the same greedy answers, and keep no TTFT; round r runs every arm with seed SEED + r. Fails if the worker
    drops keepKv (nothing cached), the bench keeps the rows in round 0, or every round gets one seed."""
    bench = run_bench(
        synth_package,
        tmp_path / "bench",
        *("--arms", "none,auto", "--strata", "chat", "--prompts", "1", "--sampled-prompts", "0"),
        *("--repeats", "2", "--keep-prompt-kv", "--backend", "cpu"),
    )
    assert bench["keep_prompt_kv"] is True
    records = bench["records"]
    assert {(r["arm"], r["repeat"]) for r in records} == {("none", 0), ("auto", 0), ("none", 1), ("auto", 1)}
    assert {(r["repeat"], r["seed"]) for r in records} == {(0, SEED), (1, SEED + 1)}  # the seed the engine used
    for r in records:
        assert "error" not in r, r
        if r["repeat"] == 0:
            assert r["cached_prompt_tokens"] == 0 and r["ttft_s"] > 0 and "kv_kept" not in r
        else:
            assert r["cached_prompt_tokens"] > 0 and r["ttft_s"] is None and r["kv_kept"], r
    tokens = {(r["arm"], r["repeat"]): r["tokens"] for r in records}
    assert len({tuple(t) for t in tokens.values()}) == 1, tokens
    row = next(r for r in bench["summary"] if r["arm"] == "auto" and r["stratum"] == "chat")
    assert row["ttft_s"] == next(r["ttft_s"] for r in records if r["arm"] == "auto" and r["repeat"] == 0)
