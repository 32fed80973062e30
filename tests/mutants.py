"""Named mutants of the exactness-critical code: plausible bugs the test suite must catch.

Each mutant is a list of exact text substitutions in one file of the repository (every `old` must occur
exactly `count` times, so a mutant cannot silently stop applying when the code moves). The mutation suite
(test_mutants.py) copies the repository, applies one mutant, and runs the mutant's catcher on the copy: the
test that must fail for that bug (named here, so a weakened catcher shows up as a surviving mutant, and each
mutant costs one test rather than a whole battery). CATCHERS, every catcher, must pass unmutated.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    old: str
    new: str
    count: int = 1


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    edits: tuple[Edit, ...]
    bug: str  # the mistake it stands for
    caught_by: str  # pytest node id of the test that must fail when the mutant is applied


# The catchers: the cheapest test found to fail for each mutant (a law, an equality with the reference, or a
# boundary case), all in the exactness suite.
SAMPLED = "tests/test_sampled_exactness.py::"
KERNEL_LAW_FULL = SAMPLED + "test_verify_kernel_output_law[full]"  # chi-square of the kernel's output law
KERNEL_LAW_REDUCED = SAMPLED + "test_verify_kernel_output_law[reduced]"
KERNEL_LAW_POINT = SAMPLED + "test_verify_kernel_output_law[point]"
CPU_LAW_POINT = SAMPLED + "test_cpu_champion_output_law[point]"
ROUND_LOOP_LAW_FULL = SAMPLED + "test_the_round_loop_law_equals_the_champion_law_by_enumeration[full]"
ROUND_LOOP_LAW_POINT = SAMPLED + "test_the_round_loop_law_equals_the_champion_law_by_enumeration[point]"
KERNEL_EQUALS_REFERENCE = "tests/test_gpu_champion.py::test_verify_kernel_decisions_equal_the_python_reference[plain]"
KERNEL_TOP_P_TIES = "tests/test_gpu_champion.py::test_top_p_keeps_tied_tokens_only_until_the_mass_reaches_p"
ONE_POSITION_LAW = "tests/test_acceptance.py::test_one_position_output_law_is_the_target[p0-q0]"
TOP_P_SUPPORT_ROW = "tests/test_processors.py::test_a_top_p_rows_support_gives_the_full_rows_samples_and_residuals"
TOP_P_PREFIX = "tests/test_processors.py::test_top_p_keeps_the_shortest_prefix_reaching_p"
GRAPH_SAMPLER_EXTREMES = (
    "tests/test_draft_sampler.py::test_the_whole_graph_samples_its_reported_q_at_extreme_uniforms[synthetic]"
)


VERIFY = "shaders/verify.wgsl"

MUTANTS = (
    # ---- the WGSL verify kernel ----
    Mutant(
        "wgsl_residual_ignores_q",
        VERIFY,
        (
            Edit("if (RESAMPLE_FROM_TARGET) { q_i = 0.0; }", "q_i = 0.0;"),
            Edit("if (cfg.draft_kind == DRAFT_REDUCED_ROWS && !RESAMPLE_FROM_TARGET) {", "if (false) {"),
        ),
        "after a rejection, sample from p instead of norm([p - q]+)",
        KERNEL_LAW_FULL,
    ),
    Mutant(
        "wgsl_residual_ignores_reduced_q",
        VERIFY,
        (Edit("if (cfg.draft_kind == DRAFT_REDUCED_ROWS && !RESAMPLE_FROM_TARGET) {", "if (false) {"),),
        "the residual subtracts q for full rows and point masses but not for reduced rows",
        KERNEL_LAW_REDUCED,
    ),
    Mutant(
        "wgsl_reduced_q_full_stride",
        VERIFY,
        (Edit("q[row * cfg.reduced + m]", "q[row * V + m]", count=2),),
        "reduced q rows read with the full-vocabulary stride",
        KERNEL_LAW_REDUCED,
    ),
    Mutant(
        "wgsl_penalty_ignores_round_drafts",
        VERIFY,
        (Edit("for (var i = 0u; i < row; i++) {", "for (var i = 0u; i < 0u; i++) {"),),
        "row j's repetition penalty ignores drafts 1..j of the same round",
        KERNEL_LAW_FULL,
    ),
    Mutant(
        "wgsl_accept_min_1_p",
        VERIFY,
        (Edit("let a = min(1.0, work[y] / q_y);", "let a = min(1.0, work[y]);"),),
        "accept with probability min(1, p) instead of min(1, p/q)",
        KERNEL_LAW_FULL,
    ),
    Mutant(
        "wgsl_bonus_from_wrong_row",
        VERIFY,
        (
            Edit(
                "    let terminal = sample(lane, 0u, uniform24(seed, DOMAIN_TOKEN, cfg.token + k, 0u));",
                "    if (k > 0u) { _ = process_row(lane, k - 1u); }\n    let terminal = sample(lane, 0u, "
                "uniform24(seed, DOMAIN_TOKEN, cfg.token + k, 0u));",
            ),
        ),
        "the bonus token sampled from row k-1 instead of row k",
        KERNEL_LAW_FULL,
    ),
    Mutant(
        "wgsl_top_p_boundary",
        VERIFY,
        (Edit("while (mass < cfg.top_p && cut > 0.0", "while (mass <= cfg.top_p && cut > 0.0"),),
        "top-p keeps one tied token more than the shortest prefix reaching p",
        KERNEL_TOP_P_TIES,
    ),
    Mutant(
        "wgsl_top_p_candidates_overlap",
        VERIFY,
        (Edit("work[V + start + copied.count] = x;", "work[V + copied.count] = x;"),),
        "top-p's per-lane candidate copies all start at V, so lanes overwrite each other's",
        KERNEL_LAW_FULL,
    ),
    Mutant(
        "wgsl_correction_wrong_domain",
        VERIFY,
        (
            Edit(
                "sample(lane, V, uniform24(seed, DOMAIN_CORRECTION, cfg.round, row))",
                "sample(lane, V, uniform24(seed, DOMAIN_ACCEPT, cfg.round, row))",
            ),
        ),
        "the correction sample reuses the accept test's uniform (wrong Philox domain)",
        KERNEL_EQUALS_REFERENCE,
    ),
    Mutant(
        "wgsl_coupled_rows_share_a_uniform",
        VERIFY,
        (Edit("uniform24(seed, DOMAIN_TOKEN, cfg.token + row, 0u)", "uniform24(seed, DOMAIN_TOKEN, cfg.token, 0u)"),),
        "every point-mass row of a round is sampled with row 0's uniform (the rows' tokens are then dependent)",
        KERNEL_LAW_POINT,
    ),
    Mutant(
        "wgsl_coupled_keyed_by_round",
        VERIFY,
        (
            Edit(
                "uniform24(seed, DOMAIN_TOKEN, cfg.token + row, 0u)",
                "uniform24(seed, DOMAIN_TOKEN, cfg.round + row, 0u)",
            ),
        ),
        "point-mass rows keyed by the round, not the token: exact, but the answer then depends on what was proposed",
        KERNEL_LAW_POINT,
    ),
    # ---- the Python specification (CPU champion path, and the reference the kernel is compared to) ----
    Mutant(
        "py_residual_ignores_q",
        "pyodide_app/acceptance.py",
        (
            Edit(
                "residual = list(map(max, map(sub, target_row, q), repeat(0)))",
                "residual = list(map(max, target_row, repeat(0)))",
            ),
        ),
        "after a rejection, sample from p instead of norm([p - q]+)",
        ONE_POSITION_LAW,
    ),
    Mutant(
        "py_supported_residual_ignores_q",
        "pyodide_app/acceptance.py",
        (
            Edit(
                "residual = {i: max(target_row[i] - draft_row.prob(i), 0) for i in target_row.support}",
                "residual = {i: max(target_row[i], 0) for i in target_row.support}",
            ),
        ),
        "after a rejection of a top-p row's draft, its residual read at p's support ignores q (keeps the token)",
        TOP_P_SUPPORT_ROW,
    ),
    Mutant(
        "py_accept_min_1_p",
        "pyodide_app/acceptance.py",
        (Edit("return min(1, p_y / q_y)", "return min(1, p_y)"),),
        "accept with probability min(1, p) instead of min(1, p/q)",
        ONE_POSITION_LAW,
    ),
    Mutant(
        "py_bonus_from_wrong_row",
        "pyodide_app/acceptance.py",
        (
            Edit(
                "Domain.TOKEN_SAMPLE, token_index + k, 0, target_rows[k])",
                "Domain.TOKEN_SAMPLE, token_index + k, 0, target_rows[k - 1])",
            ),
        ),
        "the bonus token sampled from row k-1 instead of row k",
        ROUND_LOOP_LAW_FULL,
    ),
    Mutant(
        "py_correction_wrong_domain",
        "pyodide_app/acceptance.py",
        (
            Edit(
                "draws.categorical(Domain.CORRECTION_SAMPLE, round_index, i, residual)",
                "draws.categorical(Domain.ACCEPT_UNIFORM, round_index, i, residual)",
            ),
        ),
        "the correction sample reuses the accept test's uniform (wrong Philox domain)",
        KERNEL_EQUALS_REFERENCE,
    ),
    Mutant(
        "py_coupled_rows_share_a_uniform",
        "pyodide_app/acceptance.py",
        (Edit("Domain.TOKEN_SAMPLE, token_index + i, 0, p_row)", "Domain.TOKEN_SAMPLE, token_index, 0, p_row)"),),
        "every point-mass row of a round is sampled with row 0's uniform (the rows' tokens are then dependent)",
        CPU_LAW_POINT,
    ),
    Mutant(
        "py_coupled_keeps_the_rejected_token",
        "pyodide_app/acceptance.py",
        (
            Edit(
                "drawn = draws.categorical(Domain.TOKEN_SAMPLE, token_index + i, 0, p_row)\n"
                "            if drawn == token:",
                "drawn = draws.categorical(Domain.TOKEN_SAMPLE, token_index + i, 0, p_row)\n"
                "            if draws.bernoulli(Domain.ACCEPT_UNIFORM, round_index, i, p_row[token]):",
            ),
        ),
        "a point mass tested with its own uniform while the correction is a plain sample, which may be the token",
        ROUND_LOOP_LAW_POINT,
    ),
    Mutant(
        "py_coupled_keyed_by_round",
        "pyodide_app/acceptance.py",
        (Edit("Domain.TOKEN_SAMPLE, token_index + i, 0, p_row)", "Domain.TOKEN_SAMPLE, round_index + i, 0, p_row)"),),
        "point-mass rows keyed by the round, not the token: exact, but the answer then depends on what was proposed",
        CPU_LAW_POINT,
    ),
    Mutant(
        "py_penalty_ignores_round_drafts",
        "pyodide_app/champion.py",
        (Edit("return self.request.context + self.request.drafts[:j]", "return self.request.context"),),
        "row j's repetition penalty ignores drafts 1..j of the same round",
        ROUND_LOOP_LAW_FULL,
    ),
    Mutant(
        "py_top_p_boundary",
        "pyodide_app/processors.py",
        (Edit("        if mass >= top_p:\n", "        if mass > top_p:\n"),),
        "top-p keeps one token more when the prefix mass equals p exactly",
        TOP_P_PREFIX,
    ),
    # ---- the draft graph's sampler ----
    Mutant(
        "onnx_sampler_without_shortfall",
        "build_tools/export_onnx.py",
        (
            Edit(
                '    counts = g.op("Add", [counts, g.op("Mul", [g.op("Cast", [onehot], to=i64), shortfall])])  # sum '
                "== 2^24\n",
                "",
            ),
        ),
        "q's counts sum below 2^24, so u near 1 reaches no index and the graph returns index 0",
        GRAPH_SAMPLER_EXTREMES,
    ),
)

CATCHERS = tuple(dict.fromkeys(m.caught_by for m in MUTANTS))  # the control runs these unmutated


def apply(mutant: Mutant, text: str) -> str:
    for edit in mutant.edits:
        found = text.count(edit.old)
        if found != edit.count:
            raise ValueError(
                f"mutant {mutant.name}: {edit.old!r} occurs {found} times in {mutant.path}, expected {edit.count}"
            )
        text = text.replace(edit.old, edit.new)
    return text
