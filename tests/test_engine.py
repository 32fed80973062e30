"""The native engine end to end: tokenizer -> proposer -> GPU verify (lavapipe) -> streamed text."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pyodide_app.costs import fixed_costs
from pyodide_app.errors import InvalidSettings, PromptTooLong
from pyodide_app.gpu_champion import GPUChampion
from pyodide_app.orchestrator import CancelToken
from pyodide_app.processors import SamplingSettings, process_row

from .conftest import ROOT
from .stats import chi_square_statistic, plan_chi_square

REWRITE = (
    "Rewrite this paragraph with correct spelling, changing nothing else: The quick brown fox jumpd over "
    "the lazy dog. The dog was not amused and went back to sleep under the old oak tree."
)
QUESTION = "What are three benefits of regular exercise?"


@pytest.fixture(scope="module")
def gpu():
    from pyodide_app.native.wgpu_device import WgpuDevice

    return WgpuDevice()


@pytest.fixture(scope="module")
def synth_engine(gpu, synth_package):
    from pyodide_app.native.loader import load_engine

    return load_engine(synth_package, context_limit=256, gpu=gpu)


def chat(engine, content, proposer="none", k=4, **settings):
    request = {"messages": [{"role": "user", "content": content}], "speculative": {"proposer": proposer, "k": k}}
    request.update(settings)
    events = list(engine.chat(request))
    done = events[-1]
    assert done["type"] == "done"
    assert "".join(e["text"] for e in events if e["type"] == "delta") == done["text"]  # streamed == final
    return done


def assert_speculation_ran(done: dict, expect_proposals: bool = True) -> None:
    """An identity or law test proves nothing if the answer silently fell back to champion-alone."""
    s = done["speculative"]
    assert s["fallback_code"] is None and s["error_code"] is None and s["draft_failures"] == 0, s
    if expect_proposals:
        assert s["proposed"] > 0, s


# ---- the real model -----------------------------------------------------------------------------------


def test_real_model_greedy_tokens_are_identical_for_every_proposer_and_k(gpu, real_package):
    from pyodide_app.native.loader import load_engine

    engine = load_engine(real_package, context_limit=512, gpu=gpu)
    rows = []
    for name, prompt in (("rewrite", REWRITE), ("question", QUESTION)):
        chat(engine, prompt, "none", 0, max_tokens=1, temperature=0)  # prefill once, so every arm reuses it
        alone = chat(engine, prompt, "none", 0, max_tokens=24, temperature=0)
        rows.append((name, "none", 0, alone))
        for proposer in ("prompt_lookup", "neural", "hybrid", "auto"):
            for k in {"hybrid": (4, 8), "auto": (8,)}.get(proposer, (1, 2, 4, 8)):
                done = chat(engine, prompt, proposer, k, max_tokens=24, temperature=0)
                assert done["tokens"] == alone["tokens"], f"{name} {proposer} k={k}"
                # auto on lavapipe's measured costs: lookup on the rewrite; on the question it may rightly choose none
                assert_speculation_ran(done, expect_proposals=proposer in ("neural", "hybrid") or name == "rewrite")
                rows.append((name, proposer, k, done))
    print(
        "\n[engine] SmolLM2 on lavapipe, 24 greedy tokens (one run, same process, prompt prefilled before every arm):"
    )
    print("| prompt | proposer | k | tokens/call | tokens/s | accepted/proposed |")
    for name, proposer, k, done in rows:
        s = done["speculative"]
        print(
            f"| {name} | {proposer} | {k} | {s['tokens_per_champion_call']:.2f} | {s['tokens_per_second']:.2f} | "
            f"{s['accepted']}/{s['proposed']} | {s.get('auto', {}).get('chose', '')} |"
        )
    lookup_rewrite = [d for n, p, k, d in rows if n == "rewrite" and p == "prompt_lookup" and k == 8][0]
    assert lookup_rewrite["speculative"]["tokens_per_champion_call"] > 2.0  # long copied runs were accepted


def test_real_model_sampled_tokens_are_identical_for_none_and_every_lookup_k(gpu, real_package):
    """A sampled answer made of plain and point-mass rounds is the champion's own sample of each token
    (acceptance.py's coupled rule), so one seed gives one answer whatever lookup (or auto) proposed, or how much.
    Fails where a point mass's test or correction draws a round-keyed number (the textbook rule)."""
    from pyodide_app.native.loader import load_engine

    engine = load_engine(real_package, context_limit=512, gpu=gpu)
    sampling = {"max_tokens": 24, "temperature": 0.7, "top_p": 0.9, "seed": 5}
    alone = chat(engine, REWRITE, "none", 0, **sampling)
    rejected = 0
    for k, adaptive in ((1, False), (2, False), (4, False), (8, False), (4, True)):
        request = {"messages": [{"role": "user", "content": REWRITE}], **sampling}
        request["speculative"] = {"proposer": "prompt_lookup", "k": k, "adaptive": adaptive}
        done = list(engine.chat(request))[-1]
        assert done["tokens"] == alone["tokens"], f"lookup k={k} adaptive={adaptive}"
        assert_speculation_ran(done)
        rejected += done["speculative"]["accepted"] < done["speculative"]["proposed"]
    assert rejected, "no round rejected a draft: the correction path was not exercised"
    auto = chat(engine, REWRITE, "auto", 8, **sampling)  # its drafts are point masses too, neural ones included
    assert auto["tokens"] == alone["tokens"], auto["speculative"]["auto"]["chose"]
    assert_speculation_ran(auto)


# ---- distribution on the synthetic model --------------------------------------------------------------


def exact_first_tokens(
    champion: GPUChampion, prompt: list[int], settings: SamplingSettings, depth: int = 3, eos=(2,)
) -> dict:
    """P(first `depth` tokens) from the champion's own logits and the Python processors (an answer
    that ends with EOS earlier is a shorter sequence)."""
    law = {(): 1.0}
    for _ in range(depth):
        grown = {}
        for prefix, mass in law.items():
            if prefix and prefix[-1] in eos:
                grown[prefix] = mass
                continue
            context = prompt + list(prefix)
            champion.prefill(context[:-1])
            champion.forward([context[-1]], len(context) - 1)
            row = process_row(champion.read_logits(1)[0], settings, context)
            for token, p in enumerate(row):
                if p > 0:
                    grown[prefix + (token,)] = mass * p
        law = grown
    return law


def sampled_first_tokens(engine, content: str, proposer: str, samples: int, proposals: list | None = None) -> dict:
    counts = {}
    for seed in range(samples):
        done = chat(engine, content, proposer, 2, max_tokens=3, temperature=1.0, top_p=0.5, seed=seed)
        assert_speculation_ran(done, expect_proposals=False)
        if proposals is not None:
            proposals.append(done["speculative"]["proposed"])
        key = tuple(done["tokens"])
        counts[key] = counts.get(key, 0) + 1
    return counts


SAMPLES = 400


@pytest.fixture
def drafting_pays(synth_engine):
    """Costs under which auto drafts (flat verify, cheap draft), for tests that need it to speculate."""
    saved = synth_engine.costs
    synth_engine.costs = {kind: fixed_costs([10.0] * 9, 0.5) for kind in ("greedy", "sampled", "sampled+top_p")}
    synth_engine.refine_costs = False  # the synthetic champion's real rows cost nearly a forward each
    yield
    synth_engine.costs, synth_engine.refine_costs = saved, True


@pytest.mark.parametrize("proposer", ["none", "prompt_lookup", "neural", "hybrid", "auto"])
def test_first_three_tokens_follow_the_champion_law(synth_engine, drafting_pays, proposer):
    """End to end through the engine (tokenizer, ONNX draft on onnxruntime, GPU verify): a smoke test of
    the wiring at T > 0. It has little power against a wrong residual (the synthetic draft rarely
    overlaps p); the powered tests per draft-row kind are in test_sampled_exactness.py."""
    content = "the capital of france is paris. the capital of"
    prompt = synth_engine.encode_prompt([{"role": "user", "content": content}])
    law = exact_first_tokens(synth_engine.champion, prompt, SamplingSettings(temperature=1.0, top_p=0.5))
    plan = plan_chi_square(law, SAMPLES, 1e-3)  # fixed before sampling
    proposals: list[int] = []
    counts = sampled_first_tokens(synth_engine, content, proposer, SAMPLES, proposals)
    if proposer != "none":
        assert sum(proposals) > 0, "speculation never proposed anything"
    statistic = chi_square_statistic(plan, counts)
    print(
        f"\n[engine] {proposer}: chi2={statistic:.2f} df={plan.degrees_of_freedom} threshold={plan.threshold:.2f} "
        f"n={SAMPLES}"
    )
    assert statistic <= plan.threshold


def sharp_self_draft(synth_package):
    """A draft that is the champion itself (numpy reference): q overlaps p a lot but
    is sharper (temperature 0.3), so rejections are common and the residual differs strongly from p."""
    from build_tools.reference import CachedLogits, ReferenceModel, read_champion
    from pyodide_app.proposers import ModelDraft

    config, tensors = read_champion(synth_package)
    return ModelDraft(CachedLogits(ReferenceModel(config, tensors), 256), SamplingSettings(temperature=0.3))


@pytest.mark.parametrize("negative_control", [False, True], ids=["exact_residual", "wrong_residual"])
def test_wrong_residual_is_detected_by_the_same_test(gpu, synth_package, negative_control):
    from pyodide_app.native.loader import load_engine

    engine = load_engine(synth_package, context_limit=256, gpu=gpu)
    manifest = json.loads((synth_package / "manifest.json").read_text())
    engine.champion = GPUChampion(
        gpu,
        manifest,
        lambda n: (synth_package / n).read_bytes(),
        lambda n: (ROOT / "shaders" / f"{n}.wgsl").read_text(),
        context_limit=256,
        negative_control=negative_control,
    )
    draft = sharp_self_draft(synth_package)
    engine._proposer = lambda request, prompt: draft  # the same chi-square test, with a draft that rejects often
    content = "the capital of france is paris. the capital of"
    prompt = engine.encode_prompt([{"role": "user", "content": content}])
    law = exact_first_tokens(engine.champion, prompt, SamplingSettings(temperature=1.0, top_p=0.5))
    samples = 1200
    plan = plan_chi_square(law, samples, 1e-3)
    statistic = chi_square_statistic(plan, sampled_first_tokens(engine, content, "neural", samples))
    label = "wrong" if negative_control else "exact"
    print(
        f"\n[engine] sharp self-draft, {label} residual: chi2={statistic:.2f} df={plan.degrees_of_freedom} "
        f"threshold={plan.threshold:.2f} n={samples}"
    )
    assert (statistic > plan.threshold) == negative_control


# ---- settings, faults, cancellation, receipts ----------------------------------------------------------


@pytest.mark.parametrize(
    "change, error",
    [
        ({"speculative": {"proposer": "prompt_lookup", "k": 9}}, InvalidSettings),
        ({"temperature": -0.5}, InvalidSettings),
        ({"top_p": 0.0}, InvalidSettings),
        ({"top_p": 1.5}, InvalidSettings),
        ({"max_tokens": 0}, InvalidSettings),
        ({"max_tokens": True}, InvalidSettings),
        ({"seed": -1}, InvalidSettings),
        ({"seed": 1 << 64}, InvalidSettings),
        ({"speculative": {"proposer": "none", "k": 99}}, InvalidSettings),
        ({"speculative": {"proposer": "neural", "k": True}}, InvalidSettings),
        ({"speculative": {"proposer": "neural", "adaptive": "yes"}}, InvalidSettings),
        ({"speculative": {"proposer": "magic"}}, InvalidSettings),
        ({"speculative": {"proposer": "auto", "adaptive": True}}, InvalidSettings),
        ({"unknown_field": 1}, InvalidSettings),
        ({"messages": [{"role": "user", "content": "word " * 400}]}, PromptTooLong),
    ],
)
def test_invalid_requests_fail_before_any_work(synth_engine, change, error):
    calls = synth_engine.champion.calls
    request = {"messages": [{"role": "user", "content": "hi"}], **change}
    with pytest.raises(error):
        synth_engine.chat(request)
    assert synth_engine.champion.calls == calls


class FailingDraft:
    """Wraps a DraftRuntime; fails on its n-th step."""

    def __init__(self, runtime, fail_at: int):
        self.runtime, self.fail_at, self.steps = runtime, fail_at, 0
        self.vocab_size = runtime.vocab_size

    @property
    def cached(self):
        return self.runtime.cached

    def truncate(self, length):
        self.runtime.truncate(length)

    def reset(self):
        self.runtime.reset()

    def step(self, tokens, temperature, uniform):
        self.steps += 1
        if self.steps == self.fail_at:
            raise RuntimeError("onnxruntime session crashed")
        return self.runtime.step(tokens, temperature, uniform)


def with_failing_draft(engine, fail_at: int, max_tokens: int) -> tuple[dict, dict]:
    """(champion-alone answer, neural answer whose draft runtime crashes on its fail_at-th step)."""
    alone = chat(engine, "hello world", "none", 0, max_tokens=max_tokens, temperature=0)
    real = engine.draft_runtime
    engine.draft_runtime = FailingDraft(real, fail_at)
    try:
        return alone, chat(engine, "hello world", "neural", 4, max_tokens=max_tokens, temperature=0)
    finally:
        engine.draft_runtime = real


def test_draft_failure_before_the_first_token_falls_back_silently(synth_engine):
    alone, done = with_failing_draft(synth_engine, fail_at=1, max_tokens=12)
    assert done["tokens"] == alone["tokens"] and done["finish_reason"] == "length" and done["error"] is None
    assert done["receipt"]["fallback_code"] == "DRAFT_RUNTIME"


def test_draft_failure_after_output_is_a_visible_error_without_repeated_text(synth_engine):
    alone, done = with_failing_draft(synth_engine, fail_at=9, max_tokens=16)
    assert done["finish_reason"] == "error" and done["error"]["code"] == "DRAFT_RUNTIME"
    assert 0 < len(done["tokens"]) < 16
    assert alone["tokens"][: len(done["tokens"])] == done["tokens"]
    assert alone["text"].startswith(done["text"])


class FailingDevice:
    """Wraps a GPUDevice; its n-th submit raises (a lost device)."""

    def __init__(self, device, fail_at: int):
        self.device, self.fail_at, self.submits = device, fail_at, 0

    def __getattr__(self, name):
        return getattr(self.device, name)

    def submit(self, plan):
        self.submits += 1
        if self.submits == self.fail_at:
            raise RuntimeError("GPU device lost")
        self.device.submit(plan)


def test_gpu_error_is_a_visible_error(synth_engine):
    alone = chat(synth_engine, "hello world", "none", 0, max_tokens=10, temperature=0)
    champion = synth_engine.champion
    real = champion.gpu
    champion.gpu = FailingDevice(real, fail_at=5)
    try:
        done = chat(synth_engine, "hello world", "prompt_lookup", 4, max_tokens=10, temperature=0)
    finally:
        champion.gpu = real
    assert done["finish_reason"] == "error" and done["error"]["code"] == "DEVICE"
    assert alone["tokens"][: len(done["tokens"])] == done["tokens"]
    # The engine recovers: the next request is answered normally.
    assert chat(synth_engine, "hello world", "none", 0, max_tokens=10, temperature=0)["tokens"] == alone["tokens"]


def test_cancellation_mid_round_then_the_next_request_matches_a_fresh_engine(gpu, synth_package, synth_engine):
    from pyodide_app.native.loader import load_engine

    request = {
        "messages": [{"role": "user", "content": "what is the capital of france?"}],
        "max_tokens": 14,
        "temperature": 1.0,
        "seed": 11,
        "speculative": {"proposer": "neural", "k": 3},
    }
    cancel = CancelToken()
    real = synth_engine.draft_runtime

    class CancelDuringDraft(FailingDraft):
        def step(self, tokens, temperature, uniform):
            self.steps += 1
            if self.steps == 5:
                cancel.cancel()  # the user presses stop while a round is in flight
            return self.runtime.step(tokens, temperature, uniform)

    synth_engine.draft_runtime = CancelDuringDraft(real, fail_at=0)
    try:
        events = list(synth_engine.chat(request, cancel))
    finally:
        synth_engine.draft_runtime = real
    assert events[-1]["finish_reason"] == "cancelled"
    after = list(synth_engine.chat(request))[-1]
    fresh = list(load_engine(synth_package, context_limit=256, gpu=gpu).chat(request))[-1]
    assert after["tokens"] == fresh["tokens"] and after["text"] == fresh["text"]


def test_stop_strings_end_the_answer_and_are_not_shown(synth_engine):
    full = chat(synth_engine, "hello world", "none", 0, max_tokens=20, temperature=0)
    text = full["text"]
    # A 3-character stop string of plain ASCII (random output also decodes invalid bytes to U+FFFD,
    # which has no bytes in the token stream to match), occurring first after a few characters.
    start = next(
        i
        for i in range(3, len(text) - 3)
        if text[i : i + 3].isascii() and text[i : i + 3].isprintable() and text.find(text[i : i + 3]) == i
    )
    stop = text[start : start + 3]
    done = chat(synth_engine, "hello world", "prompt_lookup", 4, max_tokens=20, temperature=0, stop=[stop])
    assert done["finish_reason"] == "stop"
    assert done["text"] == text[: text.find(stop)]


def test_without_a_seed_each_answer_gets_a_fresh_one_that_reproduces_it(synth_engine):
    content = "the capital of france is paris. the capital of"
    first = chat(synth_engine, content, "neural", 2, max_tokens=12, temperature=1.0)
    second = chat(synth_engine, content, "neural", 2, max_tokens=12, temperature=1.0)
    assert first["seed"] != second["seed"] and 0 <= first["seed"] < 2**53
    again = chat(synth_engine, content, "neural", 2, max_tokens=12, temperature=1.0, seed=first["seed"])
    assert again["tokens"] == first["tokens"] and again["seed"] == first["seed"]
    assert chat(synth_engine, content, "neural", 2, max_tokens=12, temperature=1.0, seed=2**64 - 1)["seed"] == 2**64 - 1


def test_auto_is_reproducible_with_a_seed_and_reports_its_choices(synth_engine, drafting_pays):
    content = "the the the the the capital of france is paris. the capital of"
    synth_engine.forget_context()
    first = chat(synth_engine, content, "auto", 4, max_tokens=16, temperature=1.0, seed=11)
    second = chat(synth_engine, content, "auto", 4, max_tokens=16, temperature=1.0, seed=11)  # learns from first
    assert second["speculative"]["auto"]["earlier_rounds"] == first["speculative"]["rounds"]
    assert first["tokens"] == second["tokens"]  # other counts, maybe other choices: the same tokens
    synth_engine.forget_context()
    auto = first["speculative"]["auto"]
    replay = chat(synth_engine, content, "auto", 4, max_tokens=16, temperature=1.0, seed=11)
    assert auto == replay["speculative"]["auto"]  # the same state and costs: the same choices
    assert auto["policy_version"] >= 1 and auto["costs"]["verify_ms"] == [10.0] * 9
    assert sum(auto["rounds"].values()) == first["speculative"]["rounds"] and first["speculative"]["proposed"] > 0
    assert " on " in auto["chose"] and max(int(label.split("k=")[1]) for label in auto["rounds"] if "k=" in label) <= 4


def test_auto_carries_a_conversations_counts_into_its_turns_of_the_same_sampling(synth_engine, drafting_pays):
    """Turns of one conversation start from the earlier turns' acceptance counts where they sample alike (auto's
    tokens do not depend on its choices, greedy or sampled); a sampled turn after greedy ones starts from the
    priors, and its seed still reproduces it after another history."""

    def turn(messages, **settings):
        request = {"messages": messages, "speculative": {"proposer": "auto", "k": 4}, "max_tokens": 12, **settings}
        done = [e for e in synth_engine.chat(request) if isinstance(e, dict)][-1]
        return done, done["speculative"]["auto"]["earlier_rounds"]

    synth_engine.forget_context()
    opening = [{"role": "user", "content": "the the the the capital of france is paris. the capital of"}]
    first, earlier = turn(opening, temperature=0)
    assert earlier == 0 and first["speculative"]["rounds"] > 0
    answer, question = {"role": "assistant", "content": first["text"]}, {"role": "user", "content": "and of spain?"}
    follow_up = [*opening, answer, question]
    second, earlier = turn(follow_up, temperature=0)
    assert earlier == first["speculative"]["rounds"]
    _, earlier = turn([*follow_up, {"role": "assistant", "content": second["text"]}, opening[0]], temperature=0)
    assert earlier == first["speculative"]["rounds"] + second["speculative"]["rounds"]
    sampled, earlier = turn(follow_up, temperature=1.0, seed=5)
    assert earlier == 0  # the greedy turns' counts are not a sampled turn's
    later_sampled = [*follow_up, {"role": "assistant", "content": sampled["text"]}, opening[0]]
    assert turn(later_sampled, temperature=1.0, seed=6)[1] == sampled["speculative"]["rounds"]
    assert turn([{"role": "user", "content": "something else entirely"}], temperature=0)[1] == 0  # not this chat
    synth_engine.forget_context()
    assert turn(follow_up, temperature=0)[1] == 0  # a forgotten context forgets its counts too
    assert turn(follow_up, temperature=1.0, seed=5)[0]["tokens"] == sampled["tokens"]


@pytest.mark.parametrize("backend", ["webgpu", "cpu"])
def test_auto_measures_the_device_once(gpu, synth_package, backend):
    from pyodide_app.native.loader import load_engine

    engine = load_engine(synth_package, context_limit=256, gpu=gpu, backend=backend)
    assert engine.costs == {}
    done = chat(engine, "hello world", "auto", 8, max_tokens=8, temperature=0)
    costs = engine.costs["greedy"]
    assert len(costs.verify_ms) == engine.k_max + 1 and all(v > 0 for v in costs.verify_ms)
    auto = done["speculative"]["auto"]
    assert (
        costs.draft_step_ms > 0 and 0 <= costs.row_ms < costs.verify_ms[0] and auto["measured_costs"] == costs.summary()
    )
    # greedy: every round but the first (which may wait on the prefill) refines the costs
    assert auto["live_rounds"] == done["speculative"]["rounds"] - 1
    assert done["tokens"] == chat(engine, "hello world", "none", 0, max_tokens=8, temperature=0)["tokens"]
    chat(engine, "hello world", "auto", 8, max_tokens=8, temperature=0)
    assert engine.costs["greedy"] is costs  # measured once, then fixed
    assert engine.key_ms == {}  # a long context's cost: only for a long prompt (this engine has no room)
    # Sampling is measured apart (rows are processed; a rejection draws the correction), once per kind, and
    # refined live too (auto's sampled tokens do not depend on its choices either).
    sampled = chat(engine, "hello world", "auto", 8, max_tokens=8, temperature=0.7, top_p=0.9, seed=3)
    assert set(engine.costs) == {"greedy", "sampled+top_p"}
    assert sampled["speculative"]["auto"]["measured_costs"] == engine.costs["sampled+top_p"].summary()
    assert sampled["speculative"]["auto"]["live_rounds"] == sampled["speculative"]["rounds"] - 1
    assert engine.live["sampled+top_p"] is not engine.live["greedy"]
    chat(engine, "hello world", "auto", 8, max_tokens=8, temperature=1.0, top_p=0.5, seed=4)
    assert len(engine.costs) == 2


def test_auto_measures_a_long_contexts_cost_at_each_key_length_once(gpu, synth_package, monkeypatch):
    """The per-context-token cost of each row count's call (costs.measure_key_ms) is measured once per key length
    (costs.key_length: LONG_CONTEXT * sqrt(2)^j), at the first auto request whose prompt has it, and later
    requests of that length use it; a longer prompt of another key length has its own measured; short ones never
    price context. (The synthetic model holds 512 tokens: LONG_CONTEXT is lowered to 200 here, so key lengths are
    200, 283 and 400.)"""
    from pyodide_app import costs
    from pyodide_app.native.loader import load_engine

    monkeypatch.setattr(costs, "LONG_CONTEXT", 200)
    engine = load_engine(synth_package, context_limit=512, gpu=gpu, backend="webgpu")
    chat(engine, "hello world", "auto", 8, max_tokens=4, temperature=0)
    assert engine.key_ms == {}
    long_prompt = " ".join(["word"] * 120)
    length = costs.key_length(len(engine.encode_prompt([{"role": "user", "content": long_prompt}])), 512, 9)
    assert length in (200, 283)
    done = chat(engine, long_prompt, "auto", 8, max_tokens=8, temperature=0)
    key_ms = engine.key_ms[length]
    reported = [round(k, 6) for k in key_ms]
    assert len(key_ms) == 9 and min(key_ms) >= 0
    assert done["speculative"]["auto"]["costs"]["key_ms"] == reported
    assert done["speculative"]["auto"]["costs"]["key_length"] == length
    draft_key_ms, draft_feed_ms = draft_context = engine.draft_context[length]  # the draft, timed there too
    assert done["speculative"]["auto"]["costs"]["draft_key_ms"] == round(draft_key_ms, 6) and draft_feed_ms > 0
    assert done["tokens"] == chat(engine, long_prompt, "none", 0, max_tokens=8, temperature=0)["tokens"]
    again = chat(engine, long_prompt, "auto", 8, max_tokens=4, temperature=0)
    assert engine.key_ms[length] is key_ms and again["speculative"]["auto"]["costs"]["key_ms"] == reported
    longer = chat(engine, " ".join(["word"] * 210), "auto", 8, max_tokens=4, temperature=0)
    assert set(engine.key_ms) == {length, 400} and engine.key_ms[length] is key_ms
    assert set(engine.draft_context) == {length, 400} and engine.draft_context[length] is draft_context
    assert longer["speculative"]["auto"]["costs"]["key_length"] == 400
    # A short prompt never prices context, whether or not a long one came first (its choices, and so a
    # seeded sampled answer, do not depend on the engine's history).
    short = chat(engine, "hello world", "auto", 8, max_tokens=4, temperature=0)["speculative"]["auto"]["costs"]
    assert short["key_ms"] == [] and short["key_length"] == 0
    assert short["draft_key_ms"] == 0 and short["draft_feed_ms"] == round(engine.costs["greedy"].draft_feed_ms, 6)


def test_adaptive_k_is_reproducible(synth_engine):
    first = chat(
        synth_engine,
        "the the the the the",
        "neural",
        2,
        max_tokens=16,
        temperature=1.0,
        seed=5,
        speculative={"proposer": "neural", "k": 2, "adaptive": True},
    )
    second = chat(
        synth_engine,
        "the the the the the",
        "neural",
        2,
        max_tokens=16,
        temperature=1.0,
        seed=5,
        speculative={"proposer": "neural", "k": 2, "adaptive": True},
    )
    assert first["tokens"] == second["tokens"]
    assert first["speculative"]["proposed"] == second["speculative"]["proposed"]
    assert first["speculative"]["adaptive"] is True


def test_receipts_hold_no_prompt_or_output_text(synth_engine):
    secret = "my password is hunter2zebra and my card is quartzmango"
    done = chat(synth_engine, secret, "prompt_lookup", 4, max_tokens=16, temperature=1.0, seed=2)
    receipt = json.dumps(done["receipt"], ensure_ascii=False)
    for word in ("password", "hunter2zebra", "quartzmango"):
        assert word not in receipt
    text = done["text"]
    for start in range(0, max(0, len(text) - 8)):  # no 8-character piece of the answer either
        assert text[start : start + 8] not in receipt
    tokens = synth_engine.tokenizer.encode(secret)
    assert json.dumps(tokens)[1:-1] not in receipt and json.dumps(done["tokens"])[1:-1] not in receipt
    assert done["receipt"]["counts"]["completion_tokens"] == len(done["tokens"])
    assert set(done["receipt"]) >= {
        "champion_weights",
        "tokenizer",
        "chat_template",
        "sampling_policy",
        "accepted_histogram",
        "timings_s",
        "failure_code",
        "fallback_code",
    }


def test_cli_json_and_samples(synth_package):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyodide_app",
            "generate",
            "--model",
            str(synth_package),
            "--prompt",
            "hello world",
            "--mode",
            "prompt_lookup",
            "--k",
            "3",
            "--temperature",
            "1",
            "--seed",
            "7",
            "--samples",
            "3",
            "--max-tokens",
            "6",
            "--context",
            "128",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [s["seed"] for s in out["samples"]] == [7, 8, 9]
    assert all(len(s["tokens"]) == 6 for s in out["samples"])
    assert out["stats"]["samples"] == 3 and out["stats"]["tokens_per_champion_call"] >= 1
    bad = subprocess.run(
        [sys.executable, "-m", "pyodide_app", "generate", "--model", str(synth_package), "--prompt", "x", "--k", "99"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert bad.returncode == 1 and bad.stderr.strip().splitlines() == ["error: k must be an integer in [0, 8], got 99"]


@pytest.mark.parametrize("proposer", ["none", "prompt_lookup", "neural", "hybrid"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cpu_champion_without_webgpu_gives_the_same_tokens(gpu, synth_package, synth_engine, proposer, temperature):
    """champion.onnx on onnxruntime + acceptance in Python (the no-WebGPU path) vs the WGSL champion."""
    from pyodide_app.native.loader import load_engine

    cpu_engine = load_engine(synth_package, context_limit=256, backend="cpu")
    request = {
        "messages": [{"role": "user", "content": "the capital of france is paris. the capital of"}],
        "max_tokens": 16,
        "temperature": temperature,
        "seed": 5,
        "speculative": {"proposer": proposer, "k": 0 if proposer == "none" else 4},
    }
    on_cpu, on_gpu = list(cpu_engine.chat(request))[-1], list(synth_engine.chat(request))[-1]
    assert on_cpu["tokens"] == on_gpu["tokens"]
    for done in (on_cpu, on_gpu):
        assert_speculation_ran(done, expect_proposals=proposer in ("neural", "hybrid"))
    assert on_cpu["speculative"]["proposed"] == on_gpu["speculative"]["proposed"]


@pytest.mark.parametrize("backend", ["webgpu", "cpu"])
def test_a_sampled_auto_answer_is_champion_alones_whatever_it_chooses(gpu, synth_package, backend):
    """auto's drafts are point masses (its neural draft proposes its argmax at T > 0 too), so for one seed its
    answer is champion-alone's, while it drafts from both sources and has rejections (fails with a neural draft
    that proposes its sampled token, tested by the textbook rule)."""
    from pyodide_app.native.loader import load_engine

    engine = load_engine(synth_package, context_limit=256, gpu=gpu, backend=backend)
    engine.costs = {"sampled": fixed_costs([10.0] * 9, 0.5)}  # drafting pays (see drafting_pays)
    engine.refine_costs = False
    content = "the the the the the capital of france is paris. the capital of"
    sources, rejected = set(), 0
    for seed in range(4):
        base = {"messages": [{"role": "user", "content": content}], "max_tokens": 16, "temperature": 1.0}
        alone = list(engine.chat({**base, "seed": seed, "speculative": {"proposer": "none"}}))[-1]
        auto = list(engine.chat({**base, "seed": seed, "speculative": {"proposer": "auto", "k": 4}}))[-1]
        assert auto["tokens"] == alone["tokens"], (seed, auto["speculative"]["auto"]["chose"])
        assert_speculation_ran(auto)
        sources |= {label.split(" ")[0] for label in auto["speculative"]["auto"]["rounds"]}
        rejected += auto["speculative"]["accepted"] < auto["speculative"]["proposed"]
    assert {"lookup", "neural"} <= sources and rejected


@pytest.mark.parametrize("backend", ["webgpu", "cpu"])
def test_a_seed_gives_one_sampled_answer_whatever_lookup_proposes(gpu, synth_package, synth_engine, backend):
    """The coupled rule on both verifiers: for each seed, champion-alone and prompt lookup at every k (and
    adaptive k) give the same tokens, with rejections among them (a round-keyed correction would differ)."""
    from pyodide_app.native.loader import load_engine

    engine = synth_engine if backend == "webgpu" else load_engine(synth_package, context_limit=256, backend="cpu")
    content = "the the the the the capital of france is paris. the capital of"
    rejected = 0
    for seed in range(4):
        base = {"messages": [{"role": "user", "content": content}], "max_tokens": 16, "temperature": 1.0}
        answers = {}
        for k, adaptive in ((0, False), (1, False), (2, False), (4, False), (8, False), (2, True)):
            proposer = "none" if k == 0 else "prompt_lookup"
            request = {**base, "seed": seed, "speculative": {"proposer": proposer, "k": k, "adaptive": adaptive}}
            done = list(engine.chat(request))[-1]
            assert_speculation_ran(done, expect_proposals=False)
            answers[(k, adaptive)] = done["tokens"]
            rejected += done["speculative"]["accepted"] < done["speculative"]["proposed"]
        assert len({tuple(tokens) for tokens in answers.values()}) == 1, (seed, answers)
    assert rejected, "no round rejected a draft: the correction path was not exercised"


def test_forget_context_only_drops_the_cached_prefix(synth_engine):
    request = {
        "messages": [{"role": "user", "content": "the capital of france is paris. the capital of"}],
        "max_tokens": 12,
        "temperature": 0,
        "speculative": {"proposer": "neural", "k": 3},
    }
    first = list(synth_engine.chat(request))[-1]["tokens"]
    assert synth_engine.champion.kv.tokens and synth_engine.draft_runtime.cached
    synth_engine.forget_context()
    assert synth_engine.champion.kv.tokens == [] and synth_engine.draft_runtime.cached == []
    assert list(synth_engine.chat(request))[-1]["tokens"] == first


def test_forget_context_can_keep_the_kv_rows_and_forget_autos_counts(synth_engine):
    """The bench's --keep-prompt-kv: a repeated prompt skips its prefill (usage counts the cached rows) and
    gives the same answer; what auto learned is forgotten either way, so each arm starts from the priors."""
    request = {
        "messages": [{"role": "user", "content": "the capital of france is paris. the capital of"}],
        "max_tokens": 12,
        "temperature": 0,
        "speculative": {"proposer": "auto", "k": 3},
    }
    synth_engine.forget_context()
    fresh = list(synth_engine.chat(request))[-1]
    assert fresh["usage"]["cached_prompt_tokens"] == 0 and synth_engine.learned is not None
    synth_engine.forget_context(keep_kv=True)
    assert synth_engine.learned is None
    repeated = list(synth_engine.chat(request))[-1]
    assert repeated["usage"]["cached_prompt_tokens"] == fresh["usage"]["prompt_tokens"] - 1  # all but the frontier
    assert repeated["tokens"] == fresh["tokens"]
    assert repeated["speculative"]["auto"]["earlier_rounds"] == 0


def test_memory_report_counts_what_each_champion_holds(synth_package):
    """The float32 CPU champion holds float32 copies of every weight (4 bytes per value); the compact one
    holds its MatMulNBits graph; the WebGPU one its repacked buffers. (Before the Champion protocol had
    memory_bytes, the float32 path reported the compact graph's size.)"""
    from math import prod

    from pyodide_app.native.loader import load_engine
    from pyodide_app.package_check import load_manifest

    manifest = load_manifest(synth_package)
    files, tensors = manifest["files"], manifest["champion"]["tensors"]
    dense = load_engine(synth_package, backend="cpu").memory_report()
    compact = load_engine(synth_package, backend="cpu-compact").memory_report()
    values = sum(prod(tensors[t]["shape"]) for t in set(manifest["cpu_champion"]["external_weights"].values()))
    assert dense["weights"] == files[manifest["cpu_champion"]["onnx"]]["bytes"] + 4 * values
    assert compact["weights"] == files[manifest["fallback"]["onnx"]]["bytes"]
    assert dense["kv"] == compact["kv"] > 0 and dense["draft"] == compact["draft"] > 0


def test_continue_carries_an_answer_on_where_the_token_limit_cut_it(real_package):
    """Continue after a length stop: the champion reads its own cut answer back as text (no end marker after
    it) and goes on. Greedy, that is the longer answer it would have given at once whenever the cut text
    tokenises back to the same ids: checked here on the real model (SmolLM2's BPE on prose), not assumed.
    (The synthetic model's random tokens do not round-trip, so it cannot show this.)"""
    from pyodide_app.native.loader import load_engine

    engine = load_engine(real_package, context_limit=512, backend="cpu")
    user = [{"role": "user", "content": QUESTION}]
    whole = chat(engine, QUESTION, max_tokens=24, temperature=0)
    cut = chat(engine, QUESTION, max_tokens=12, temperature=0)
    assert cut["finish_reason"] == "length" and cut["tokens"] == whole["tokens"][:12]
    opened = [*user, {"role": "assistant", "content": cut["text"]}]
    prompt = engine.encode_prompt(opened, continue_final=True)
    assert prompt == engine.encode_prompt(user) + cut["tokens"], "the cut text must tokenise back to its ids"
    request = {"messages": opened, "continue_final_message": True, "max_tokens": 12, "temperature": 0}
    rest = list(engine.chat({**request, "speculative": {"proposer": "prompt_lookup", "k": 4}}))[-1]
    assert rest["usage"]["prompt_tokens"] == len(prompt)
    assert rest["tokens"] == whole["tokens"][12:]
    assert cut["text"] + rest["text"] == whole["text"]


def carry_on(engine, question: str, cut: dict, **settings) -> dict:
    """The done event of continuing `cut` (an answer to `question`) from its token ids."""
    answer = {"role": "assistant", "content": cut["text"], "tokens": cut["tokens"]}
    request = {"messages": [{"role": "user", "content": question}, answer], "continue_final_message": True}
    return list(engine.chat({**request, **settings}))[-1]


@pytest.mark.parametrize("proposer", ["none", "prompt_lookup"])
def test_continue_from_the_answers_tokens_extends_exactly_what_the_model_wrote(synth_engine, proposer):
    """The synthetic model's byte tokens seldom form whole UTF-8 characters: this answer's cut text decodes
    with U+FFFD, which tokenises to other ids (checked), and the cut splits a character (the texts of the two
    halves, joined, are not the whole answer's text: checked). Given the ids, greedy continuation is the longer
    answer token for token, and answer_text the longer answer's text. Fails when the engine re-tokenises the
    text despite the ids, or joins the texts as they were shown."""
    question, settings = "hello there", {"temperature": 0, "speculative": {"proposer": proposer, "k": 4}}
    whole = chat(synth_engine, question, proposer, max_tokens=16, temperature=0)
    cut = chat(synth_engine, question, proposer, max_tokens=8, temperature=0)
    assert cut["finish_reason"] == "length" and cut["tokens"] == whole["tokens"][:8]
    user = [{"role": "user", "content": question}]
    as_text = synth_engine.encode_prompt([*user, {"role": "assistant", "content": cut["text"]}], continue_final=True)
    assert as_text != synth_engine.encode_prompt(user) + cut["tokens"], "this cut text must not round-trip"
    rest = carry_on(synth_engine, question, cut, max_tokens=8, **settings)
    assert rest["usage"]["prompt_tokens"] == len(synth_engine.encode_prompt(user)) + 8
    assert rest["tokens"] == whole["tokens"][8:]
    assert cut["text"] + rest["text"] != whole["text"], "this cut must split a character"
    assert rest["answer_text"] == whole["text"] == whole["answer_text"]
    longer = chat(synth_engine, question, proposer, max_tokens=20, temperature=0)
    twice = {"text": rest["answer_text"], "tokens": whole["tokens"]}  # a continued answer, continued again
    assert carry_on(synth_engine, question, twice, max_tokens=4, **settings)["tokens"] == longer["tokens"][16:]


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda cut: {**cut, "tokens": cut["tokens"][:-1]}, "do not spell its content"),
        (lambda cut: {**cut, "text": cut["text"] + "!"}, "do not spell its content"),
        (lambda cut: {**cut, "tokens": [*cut["tokens"][:-1], 10**6]}, "token ids in"),
        (lambda cut: {**cut, "tokens": [True] * len(cut["tokens"])}, "token ids in"),
        (lambda cut: {**cut, "tokens": "1 2 3"}, "token ids in"),
    ],
)
def test_continued_tokens_that_are_invalid_or_do_not_spell_the_content_are_refused(synth_engine, change, words):
    """Never a silent wrong answer: ids that are not the content's would continue another answer than shown."""
    cut = chat(synth_engine, "hello there", max_tokens=8, temperature=0)
    with pytest.raises(InvalidSettings, match=words):
        carry_on(synth_engine, "hello there", change(cut), max_tokens=4)


@pytest.mark.parametrize(
    "messages, flag", [([{"role": "user", "content": "hi"}], True), ([{"role": "assistant", "content": "hi"}], "yes")]
)
def test_continue_needs_an_assistant_message_last_and_a_boolean(synth_engine, messages, flag):
    with pytest.raises(InvalidSettings):
        synth_engine.chat({"messages": messages, "continue_final_message": flag})


def test_a_long_conversation_drops_its_oldest_turns_to_fit(synth_engine):
    """The page sends what fits: whole turns go first, oldest first; the system message and the new
    question always stay; a question that cannot fit even alone is reported as not fitting."""
    system = {"role": "system", "content": "Be brief."}
    turns = [
        message
        for i in range(6)
        for message in ({"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": "fine"})
    ]
    chat_ = [system, *turns, {"role": "user", "content": "the last question"}]
    whole = len(synth_engine.encode_prompt(chat_))
    assert whole + 16 <= 256, whole
    assert synth_engine.fit_conversation(chat_, room=16) == {
        "dropped": 0,
        "prompt_tokens": whole,
        "fits": True,
        "limit": 256,
    }
    room = 256 - whole + 60  # forces some turns out
    fit = synth_engine.fit_conversation(chat_, room)
    kept = [system, *chat_[1 + fit["dropped"] :]]
    assert fit["fits"] and fit["dropped"] > 0 and fit["dropped"] % 2 == 0, fit
    assert fit["prompt_tokens"] == len(synth_engine.encode_prompt(kept)) <= 256 - room
    one_fewer_turn = [system, *chat_[1 + fit["dropped"] - 2 :]]
    assert len(synth_engine.encode_prompt(one_fewer_turn)) > 256 - room, "it dropped more than it had to"
    alone = synth_engine.fit_conversation([system, {"role": "user", "content": "word " * 400}], room=16)
    assert not alone["fits"] and alone["dropped"] == 0
