"""The WGSL champion on Mesa lavapipe (wgpu-py): logits vs the numpy reference, batch invariance,
the on-device verify kernel vs the Python reference, KV rollback, limits, greedy exactness."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from build_tools.reference import ReferenceModel, read_champion
from pyodide_app import gpu_champion
from pyodide_app.acceptance import Decision, FullRow, PointMass, ReducedRow
from pyodide_app.champion import VerifyRequest, decide
from pyodide_app.errors import GPUUnsupported, TargetNumericError
from pyodide_app.gpu import check_limits
from pyodide_app.gpu_champion import KERNEL_FAMILIES, GPUChampion
from pyodide_app.gpu_weights import fuse_projections
from pyodide_app.kernel_abi import RESULT_BYTES
from pyodide_app.orchestrator import Emitted, GenerationConfig, Orchestrator
from pyodide_app.processors import SamplingSettings, process_row
from pyodide_app.proposers import NoProposer, PromptLookup
from pyodide_app.sampling import SeededDraws
from pyodide_app.self_test import run_self_test
from pyodide_app.waits import finish

from .conftest import ROOT
from .stats import chi_square_statistic, plan_chi_square

K_MAX = 8
SHADERS = ROOT / "shaders"


@pytest.fixture(scope="module")
def gpu():
    wgpu_device = pytest.importorskip("pyodide_app.native.wgpu_device")  # wgpu is a declared dependency
    return wgpu_device.WgpuDevice()


def load(gpu, package: Path, context_limit: int, kernels: str = "auto") -> GPUChampion:
    manifest = json.loads((package / "manifest.json").read_text())
    return GPUChampion(
        gpu,
        manifest,
        lambda name: (package / name).read_bytes(),
        lambda name: (SHADERS / f"{name}.wgsl").read_text(),
        k_max=K_MAX,
        context_limit=context_limit,
        kernels=kernels,
    )


@pytest.fixture(scope="module")
def synth(gpu, synth_package):
    """The champion as the app loads it (matmul family timed at load)."""
    config, tensors = read_champion(synth_package)
    return load(gpu, synth_package, 128), ReferenceModel(config, tensors)


@pytest.fixture(scope="module", params=KERNEL_FAMILIES)
def synth_each(request, gpu, synth_package):
    """The champion with each matmul kernel family in turn."""
    config, tensors = read_champion(synth_package)
    champion = load(gpu, synth_package, 128, kernels=request.param)
    assert champion.kernel_family == request.param
    return champion, ReferenceModel(config, tensors)


def test_auto_picks_a_timed_family(synth):
    champion, _ = synth
    assert set(champion.kernel_timings) == set(KERNEL_FAMILIES)
    fastest = min(KERNEL_FAMILIES, key=lambda family: sum(champion.kernel_timings[family].values()))
    assert champion.kernel_family == fastest


def test_unknown_kernel_family_is_refused(gpu, synth_package):
    with pytest.raises(ValueError, match="kernels must be"):
        load(gpu, synth_package, 128, kernels="fastest")


def test_adapter_limits_are_checked(gpu):
    check_limits(gpu.limits, 1 << 20, gpu.adapter_name)
    with pytest.raises(GPUUnsupported, match="max-storage-buffers-per-shader-stage"):
        check_limits({**gpu.limits, "max-storage-buffers-per-shader-stage": 4}, 1 << 20, "weak adapter")
    with pytest.raises(GPUUnsupported, match="binding"):
        check_limits(gpu.limits, 200 << 20, "any adapter")
    with pytest.raises(GPUUnsupported, match="workgroup-storage"):
        check_limits({**gpu.limits, "max-compute-workgroup-storage-size": 16384}, 1 << 20, "small adapter", 17152)


@pytest.mark.parametrize("position", [0, 9, 57])
def test_synthetic_logits_match_the_reference_for_every_t(synth_each, position):
    champion, reference = synth_each
    rng = random.Random(position)
    context = [rng.randrange(champion.vocab_size) for _ in range(position + K_MAX + 1)]
    cache = reference.new_cache(len(context))
    if position:
        reference.forward(context[:position], cache, 0)
        champion.prefill(context[:position])
    worst = 0.0
    for rows in range(1, K_MAX + 2):
        tokens = context[position : position + rows]
        champion.forward(tokens, position)
        gpu_rows = np.array(champion.read_logits(rows))
        expected = reference.forward(tokens, cache, position)
        worst = max(worst, float(np.abs(gpu_rows - expected).max()))
    print(
        f"\n[gpu] synthetic, {champion.kernel_family} kernels, position {position}: max |logit diff| vs numpy over T = "
        f"1..{K_MAX + 1}: {worst:.2e}"
    )
    assert worst <= 1e-4


def test_each_rows_logits_are_bitwise_identical_for_every_t(synth_each):
    champion, _ = synth_each
    tokens = [1, 60, 70, 80, 90, 100, 110, 120, 130]
    champion.prefill([5, 6, 7])
    single = []
    for t, token in enumerate(tokens):  # row t alone, its prefix committed before
        champion.forward([token], 3 + t)
        single.append(champion.read_logits(1)[0])
    for rows in range(1, len(tokens) + 1):
        champion.forward(tokens[:rows], 3)
        batch = champion.read_logits(rows)
        for t in range(rows):
            assert np.array_equal(np.float32(batch[t]), np.float32(single[t])), f"row {t} differs at T={rows}"


def test_joined_projections_equal_separate_ones_bitwise(gpu, synth_package, synth_each, monkeypatch):
    """q/k/v (and gate/up) run as one matmul over weights joined at load; a package whose projections have
    mixed formats runs them one by one into the same buffer. Both must give the same bits (each column
    is the same dot product), and the joined form must really be in use: fewer dispatches."""
    joined, _ = synth_each
    monkeypatch.setattr(gpu_champion, "fuse_projections", lambda tensors, n_layers: tensors)
    separate = load(gpu, synth_package, 128, kernels=joined.kernel_family)
    layers = joined.config.n_layers
    assert len(separate.plan(1)) == len(joined.plan(1)) + 3 * layers, "projections not joined"
    tokens = [3, 14, 15, 92, 65]
    for champion in (joined, separate):
        champion.forget()
        champion.prefill([2, 7, 1, 8])
        champion.forward(tokens, 4)
    assert np.array_equal(np.float32(joined.read_logits(5)), np.float32(separate.read_logits(5)))
    assert kv_rows(joined, 9) == kv_rows(separate, 9)


def test_projections_are_joined_only_where_formats_match():
    def entry(fmt, n, shard):
        return {"format": fmt, "shape": [64, n], "parts": [{"shard": shard, "offset": 0, "bytes": n}]}

    tensors = {
        "blk.0.attn_q.weight": entry("q4_1", 64, "q"),
        "blk.0.attn_k.weight": entry("q4_1", 32, "k"),
        "blk.0.attn_v.weight": entry("q8_0", 32, "v"),
        "blk.0.ffn_gate.weight": entry("q4_1", 128, "g"),
        "blk.0.ffn_up.weight": entry("q4_1", 128, "u"),
    }
    fused = fuse_projections(tensors, 1)
    assert {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"} <= set(fused)
    assert "blk.0.attn_qkv.weight" not in fused
    gate_up = fused["blk.0.ffn_gate_up.weight"]
    assert gate_up["shape"] == [64, 256] and [p["shard"] for p in gate_up["parts"]] == ["g", "u"]
    assert "blk.0.ffn_gate.weight" not in fused and "blk.0.ffn_up.weight" not in fused


def kv_rows(champion, rows: int) -> list[bytes]:
    """Every layer's K and V cache rows 0..rows-1, as bytes (cache layout [KVH, CTX, HD])."""
    c = champion.config
    out = []
    for cache in champion.k_cache + champion.v_cache:
        for head in range(c.n_kv_heads):
            start = (head * champion.context_limit) * c.head_dim * 4
            out.append(champion.gpu.read_buffer(cache, start, rows * c.head_dim * 4))
    return out


def test_chunked_prefill_writes_the_kv_rows_of_one_row_calls(synth_each):
    champion, _ = synth_each
    rng = random.Random(5)
    length = min(2 * champion.prefill_rows + 6, champion.context_limit - 2)  # a full chunk, then a partial one
    assert length > champion.prefill_rows + champion.t_max
    tokens = [rng.randrange(champion.vocab_size) for _ in range(length)]
    assert champion.prefill_rows > champion.t_max
    champion.forget()
    for position, token in enumerate(tokens):
        champion.forward([token], position)
    one_by_one = kv_rows(champion, len(tokens))
    champion.forward([3], len(tokens))
    logits_after = champion.read_logits(1)
    champion.forget()
    champion.prefill([9] * len(tokens))  # scribble first
    champion.forget()
    champion.prefill(tokens)
    assert kv_rows(champion, len(tokens)) == one_by_one, "chunked prefill wrote different KV rows"
    champion.forward([3], len(tokens))
    assert np.array_equal(np.float32(champion.read_logits(1)), np.float32(logits_after))


def test_kv_rollback_after_a_rejection_equals_a_fresh_run(synth_each):
    champion, _ = synth_each
    committed = [1, 40, 41, 42]
    champion.prefill(committed[:-1])
    champion.forward([committed[-1], 300, 301, 302, 303], 3)  # drafts 300.. rejected: rows 4..7 now stale
    champion.forward([77, 78], 4)  # the correction 77 and one more token, at the committed length
    after_rejection = champion.read_logits(2)
    champion.prefill([9, 9, 9, 9, 9, 9, 9, 9])  # scribble over everything
    champion.prefill(committed)
    champion.forward([77, 78], 4)
    assert np.array_equal(np.float32(champion.read_logits(2)), np.float32(after_rejection))


# ---- the verify kernel in isolation, on exact fixtures -------------------------------------------------

DYADIC = [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.03125]  # exactly representable, sums to 1


def dyadic_logits(vocab: int, rng: random.Random, favoured=(), support: int = 6) -> list[float]:
    """log of a dyadic distribution on `support` tokens, the `favoured` ones (distinct, up to 2) holding the
    largest masses; the rest far below (p = 0 in f32). Favouring a round's earlier drafts makes a penalty
    that forgets them change this row's decision."""
    row = [-200.0] * vocab
    chosen = list(dict.fromkeys(favoured))[:2]
    chosen += rng.sample([t for t in range(vocab) if t not in chosen], support - len(chosen))
    for token, p in zip(chosen, DYADIC):
        row[token] = math.log(p)
    return row


def support_of(row: list[float]) -> list[int]:
    return [t for t, x in enumerate(row) if x > -100]


def draft_fixture(vocab: int, rng: random.Random, k: int, kind: str):
    """Rows [k+1], drafts [k] and q rows of one round. Drafts are mostly tokens the target likes (p > 0),
    so acceptance, residuals and later rows all get exercised; row j favours drafts 1..j."""
    rows, drafts = [], []
    for j in range(k + 1):
        rows.append(dyadic_logits(vocab, rng, favoured=drafts[::-1]))
        if j < k:
            roll, support = rng.random(), support_of(rows[j])
            top = max(support, key=lambda t: (rows[j][t], -t))
            drafts.append(top if roll < 0.5 else rng.choice(support) if roll < 0.85 else rng.randrange(vocab))
    if kind == "point":
        return rows, drafts, tuple(PointMass(d) for d in drafts)
    if kind == "full":
        q_rows = []
        for j, d in enumerate(drafts):
            q = [0.0] * vocab
            others = rng.sample([t for t in support_of(rows[j]) + rng.sample(range(vocab), 3) if t != d], 3)
            for token, mass in zip([d] + others, [0.5, 0.25, 0.125, 0.125]):
                q[token] += mass
            q_rows.append(FullRow(q))
        return rows, drafts, tuple(q_rows)
    ids = list(dict.fromkeys(drafts))  # one id map per round, holding every draft (distinct ids)
    ids += rng.sample([t for t in range(vocab) if t not in ids], 8 - len(ids))
    rng.shuffle(ids)
    q_rows = []
    for d in drafts:
        masses = [0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125]
        masses[ids.index(d)] = 0.25  # the draft's own mass; another id gives up 1/8
        masses[(ids.index(d) + 1) % 8] = 0.0
        q_rows.append(ReducedRow(tuple(ids), masses))
    return rows, drafts, tuple(q_rows)


SETTINGS = {
    "greedy": SamplingSettings(temperature=0),
    "plain": SamplingSettings(),
    "temperature": SamplingSettings(temperature=0.5),
    "top_k_1": SamplingSettings(top_k=1),
    "top_k_3": SamplingSettings(top_k=3),
    "top_p_1": SamplingSettings(top_p=1.0),
    "top_p_tiny": SamplingSettings(top_p=1e-6),
    "top_p_half": SamplingSettings(top_p=0.5),
    "penalty": SamplingSettings(repetition_penalty=2.0),
    "everything": SamplingSettings(temperature=0.5, top_k=4, top_p=0.9, repetition_penalty=1.5),
}


@pytest.mark.parametrize("name", SETTINGS)
def test_verify_kernel_decisions_equal_the_python_reference(synth, name):
    """Full, reduced (id map) and point-mass draft rows, k = 0..4, drafts the target mostly likes."""
    champion, _ = synth
    settings = SETTINGS[name]
    vocab = champion.vocab_size
    rng = random.Random(name)
    outcomes = Counter()
    for trial in range(36):
        k = trial % 5
        kind = ("point", "full", "reduced")[trial % 3]
        rows, drafts, q_rows = draft_fixture(vocab, rng, k, kind)
        context = (1, 2, 3, 4)  # no draft in the committed context: only the round's own drafts penalise them
        request = VerifyRequest(
            context, len(context) - 1, tuple(drafts), q_rows if k else (), trial, settings, SeededDraws(1000 + trial)
        )
        on_gpu = champion.verify_logits(rows, request)
        reference = decide(rows, request)
        assert on_gpu == reference, f"trial {trial} ({kind}, k={k})"
        outcomes[on_gpu.kind] += 1
        outcomes[f"accepted>=1 {kind}"] += on_gpu.accepted >= 1
    print(f"\n[gpu] verify parity {name}: {dict(outcomes)}")
    assert outcomes["sample"] and (outcomes["bonus"] or outcomes["correction"])
    if name not in ("greedy", "top_k_1", "top_p_tiny"):  # (those make p a point mass) acceptance for every row kind
        assert all(outcomes[f"accepted>=1 {kind}"] for kind in ("point", "full", "reduced")), dict(outcomes)


def test_top_p_keeps_tied_tokens_only_until_the_mass_reaches_p(synth):
    """Four tokens with logit 0 (p = 1/4 each, exact in f32) and top_p = 1/2: the shortest prefix by
    (p desc, index asc) reaching 1/2 is the two lowest ids. One tie too many is a boundary off-by-one."""
    champion, _ = synth
    row = [-200.0] * champion.vocab_size
    tied = [40, 7, 300, 150]
    for token in tied:
        row[token] = 0.0
    settings = SamplingSettings(top_p=0.5)
    assert [t for t, p in enumerate(process_row(row, settings)) if p > 0] == [7, 40]
    seen = Counter()
    for seed in range(40):
        request = VerifyRequest((1, 2), 1, (), (), 0, settings, SeededDraws(seed))
        decision = champion.verify_logits([row], request)
        assert decision == decide([row], request)
        seen[decision.terminal] += 1
    assert set(seen) == {7, 40}


def test_greedy_ties_break_to_the_lowest_index(synth):
    champion, _ = synth
    row = [0.0] * champion.vocab_size
    row[17] = row[5] = row[300] = 3.0
    request = VerifyRequest((1, 2), 1, (), (), 0, SamplingSettings(temperature=0))
    assert champion.verify_logits([row], request).terminal == 5


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_logits_are_a_named_failure(synth, bad):
    champion, _ = synth
    row = [0.0] * champion.vocab_size
    row[3] = bad
    request = VerifyRequest((1, 2), 1, (), (), 0, SamplingSettings(), SeededDraws(1))
    with pytest.raises(TargetNumericError):
        champion.verify_logits([row], request)
    with pytest.raises(TargetNumericError):
        decide([row], request)
    assert RESULT_BYTES <= 64  # what a round reads back


# ---- where the two verifiers could disagree: each edge case decided the same way by both ---------------


def both(champion, rows, request):
    """The device's decision, checked equal to the Python verifier's (the CPU champion path)."""
    on_gpu = champion.verify_logits(rows, request)
    assert on_gpu == decide(rows, request)
    return on_gpu


def test_rows_after_the_first_rejection_are_not_read_by_either_verifier(synth):
    """Row 1 holds a NaN, but the draft is rejected at row 0: the verify kernel never processes row 1, and
    the Python verifier (rows processed on first use) must not refuse the round for it either."""
    champion, _ = synth
    row = [-200.0] * champion.vocab_size
    row[4] = 0.0
    poisoned = list(row)
    poisoned[9] = float("nan")
    for settings, draws in ((SamplingSettings(temperature=0), None), (SamplingSettings(), SeededDraws(2))):
        request = VerifyRequest((1, 2), 1, (7,), (PointMass(7),), 0, settings, draws)
        assert both(champion, [row, poisoned], request) == Decision(0, 4, "correction")


def test_minus_infinity_masks_a_token_on_both_verifiers(synth):
    champion, _ = synth
    row = [-200.0] * champion.vocab_size
    row[3], row[4], row[9] = float("-inf"), 0.0, 0.5
    for seed in range(30):
        for settings in (SamplingSettings(repetition_penalty=1.5, top_k=3), SamplingSettings(temperature=0)):
            request = VerifyRequest((1, 3), 1, (), (), 0, settings, SeededDraws(seed))
            assert both(champion, [row], request).terminal in (4, 9)
    masked = [float("-inf")] * champion.vocab_size
    request = VerifyRequest((1, 2), 1, (), (), 0, SamplingSettings(), SeededDraws(1))
    with pytest.raises(TargetNumericError):  # nothing left to sample
        champion.verify_logits([masked], request)
    with pytest.raises(TargetNumericError):
        decide([masked], request)


def test_top_p_compares_against_the_same_f32_threshold(synth):
    """Ten tied tokens (p = 1/10) and top_p = 0.9: nine reach f32(0.9) = 0.89999998; in float64 the
    running sum 0.8999999999999999 would fall short and keep all ten."""
    champion, _ = synth
    row = [-200.0] * champion.vocab_size
    tied = list(range(100, 110))
    for token in tied:
        row[token] = 0.0
    seen = Counter(
        both(champion, [row], VerifyRequest((1, 2), 1, (), (), 0, SamplingSettings(top_p=0.9), SeededDraws(s))).terminal
        for s in range(60)
    )
    assert set(seen) <= set(tied[:9]) and len(seen) >= 6


def test_minus_zero_and_zero_tie_in_top_k(synth):
    """-0 and +0 are equal logits: top-k breaks the tie by index on both verifiers."""
    champion, _ = synth
    row = [-200.0] * champion.vocab_size
    row[5], row[10], row[20] = -0.0, 0.0, 1.0
    seen = Counter(
        both(champion, [row], VerifyRequest((1, 2), 1, (), (), 0, SamplingSettings(top_k=2), SeededDraws(s))).terminal
        for s in range(40)
    )
    assert set(seen) == {5, 20}


@pytest.mark.parametrize("tiny, refused", [(2.0**-21, True), (2.0**-19, False)])
def test_the_residual_floor_is_the_same_on_both_verifiers(synth, tiny, refused):
    """p = (1/2, 1/2) on tokens 7, 8; q = (1 - e) p + e * delta(50) drafts token 50 (p = 0, always rejected):
    the residual mass is exactly e. Below FLOAT_RESIDUAL_FLOOR (1e-6) both refuse the round."""
    from pyodide_app.acceptance import FLOAT_RESIDUAL_FLOOR
    from pyodide_app.errors import ResidualMassError

    champion, _ = synth
    vocab = champion.vocab_size
    row = [-200.0] * vocab
    row[7] = row[8] = 0.0
    q = [0.0] * vocab
    q[7] = q[8] = 0.5 * (1 - tiny)
    q[50] = tiny
    request = VerifyRequest((1, 2), 1, (50,), (FullRow(q),), 0, SamplingSettings(), SeededDraws(3))
    assert (tiny <= FLOAT_RESIDUAL_FLOOR) == refused
    if refused:
        with pytest.raises(ResidualMassError):
            champion.verify_logits([row, row], request)
        with pytest.raises(ResidualMassError):
            decide([row, row], request)
    else:
        assert both(champion, [row, row], request).terminal in (7, 8)


def test_tiny_temperatures_are_refused_before_any_work():
    from pyodide_app.errors import InvalidSettings
    from pyodide_app.processors import MIN_TEMPERATURE

    with pytest.raises(InvalidSettings, match="greedy"):
        SamplingSettings(temperature=MIN_TEMPERATURE / 2).validate()
    SamplingSettings(temperature=MIN_TEMPERATURE).validate()


def sample_counts(champion, rows, request_for, samples: int) -> Counter:
    counts = Counter()
    for r in range(samples):
        counts[champion.verify_logits(rows, request_for(r)).terminal] += 1
    return counts


@pytest.mark.parametrize("case", ["baseline", "bonus", "residual"])
def test_device_sampling_distributions_pass_chi_square(synth, case):
    champion, _ = synth
    vocab = champion.vocab_size
    rng = random.Random(case)
    target = [-200.0] * vocab
    support = rng.sample(range(vocab), 6)
    for token, weight in zip(support, [3.0, 2.0, 1.5, 1.0, 0.5, 0.0]):
        target[token] = weight
    settings = SamplingSettings(temperature=0.8, top_p=0.95)
    p = process_row(target, settings, (1, 2))
    # Sample r: round r under seed 99 + r (a plain or bonus sample's uniform is keyed by the token's context
    # index, here always 2, so one seed would draw the same token every time).
    if case == "baseline":
        expected = {t: p[t] for t in range(vocab) if p[t] > 0}
        make = lambda r: VerifyRequest((1, 2), 1, (), (), r, settings, SeededDraws(99 + r))  # noqa: E731
        rows = [target]
    elif case == "bonus":
        draft = support[0]
        expected = {t: p[t] for t in range(vocab) if p[t] > 0}
        q_one = FullRow([1.0 if t == draft else 0.0 for t in range(vocab)])
        certain = [-200.0] * vocab
        certain[draft] = 0.0  # p(draft) = 1: always accepted, the bonus comes from row 1
        make = lambda r: VerifyRequest((1, 2), 1, (draft,), (q_one,), r, settings, SeededDraws(99 + r))  # noqa: E731
        rows = [certain, target]
    else:
        draft = support[0]  # the most likely token, proposed with certainty -> residual = p without it
        residual = [0.0 if t == draft else p[t] for t in range(vocab)]
        mass = sum(residual)
        expected = {t: residual[t] / mass for t in range(vocab) if residual[t] > 0}
        make = lambda r: VerifyRequest((1, 2), 1, (draft,), (PointMass(draft),), r, settings, SeededDraws(99 + r))  # noqa: E731
        rows = [target, target]
    samples = 1500
    plan = plan_chi_square(expected, samples, 1e-3)
    counts = sample_counts(champion, rows, make, samples)
    if case == "residual":  # only rejections sample the residual; accepted rounds have terminal = bonus
        counts = Counter()
        r = 0
        while sum(counts.values()) < samples:
            decision = champion.verify_logits(rows, make(r))
            r += 1
            if decision.kind == "correction":
                counts[decision.terminal] += 1
    statistic = chi_square_statistic(plan, counts)
    print(
        f"\n[gpu] {case} sampling: chi2={statistic:.2f} df={plan.degrees_of_freedom} threshold={plan.threshold:.2f} "
        f"n={samples}"
    )
    assert statistic <= plan.threshold


# ---- end to end on the synthetic model -----------------------------------------------------------------


def run_tokens(champion, proposer, prompt, settings, k=4, max_new=24, seed=3):
    config = GenerationConfig(max_new_tokens=max_new, k=k, settings=settings, seed=seed)
    events = Orchestrator(champion, proposer, config, lambda t: b"x").generate(prompt)
    return [t for e in events if isinstance(e, Emitted) for t in e.tokens]


def test_greedy_speculation_on_the_gpu_equals_champion_alone(synth_each):
    champion, _ = synth_each
    prompt = [1, 60, 61, 62, 60, 61, 62, 60, 61]
    settings = SamplingSettings(temperature=0)
    alone = run_tokens(champion, NoProposer(), prompt, settings)
    for k in (1, 4, 8):
        assert run_tokens(champion, PromptLookup(), prompt, settings, k=k) == alone
    assert len(alone) == 24


# ---- the real model -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_reference(real_package):
    config, tensors = read_champion(real_package)
    return ReferenceModel(config, tensors), json.loads((real_package / "golden.json").read_text())


@pytest.fixture(scope="module", params=KERNEL_FAMILIES)
def real(request, gpu, real_package, real_reference):
    reference, golden = real_reference
    return load(gpu, real_package, 256, kernels=request.param), reference, golden


def test_real_model_teacher_forced_top1_agrees_with_the_reference(real):
    champion, reference, golden = real
    agree = total = 0
    margins = []
    for case in golden["cases"]:
        sequence = case["prompt_ids"] + case["greedy"]
        expected = reference.forward(sequence, reference.new_cache(len(sequence)), 0)
        for start in range(0, len(sequence), champion.t_max):
            chunk = sequence[start : start + champion.t_max]
            champion.forward(chunk, start)
            for offset, row in enumerate(champion.read_logits(len(chunk))):
                ref = expected[start + offset]
                top2 = np.sort(ref)[-2:]
                total += 1
                if int(np.argmax(row)) == int(np.argmax(ref)):
                    agree += 1
                else:
                    margins.append(float(top2[1] - top2[0]))
    rate = agree / total
    print(
        f"\n[gpu] SmolLM2 ({champion.kernel_family} kernels) teacher-forced top-1 agreement with numpy: "
        f"{agree}/{total} = {rate:.4f}; "
        f"disagreement margins: {[round(m, 4) for m in margins]}"
    )
    assert rate >= 0.995
    assert all(m < 0.01 for m in margins)


def test_real_model_greedy_generation_matches_the_golden_vectors(real):
    champion, _, golden = real
    for case in golden["cases"]:
        tokens = run_tokens(
            champion,
            NoProposer(),
            case["prompt_ids"],
            SamplingSettings(temperature=0),
            k=0,
            max_new=len(case["greedy"]),
        )
        print(
            f"\n[gpu] {case['messages'][0]['content'][:40]!r}: {len(tokens)} tokens, identical: "
            f"{tokens == case['greedy']}"
        )
        assert tokens == case["greedy"]


def test_real_model_passes_the_exactness_self_test(real):
    """What the page's "Check this device" runs, on SmolLM2 with each kernel family (lavapipe)."""
    champion, _, golden = real
    report = finish(run_self_test(champion, golden, champion.t_max))
    print(
        f"\n[gpu] self-test ({champion.kernel_family}): {report['seconds']:.1f} s, "
        + ", ".join(f"{c['name']} {c['seconds']:.1f} s" for c in report["checks"])
    )
    assert report["passed"], report
