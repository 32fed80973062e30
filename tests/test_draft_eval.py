"""The independent evaluation set for neural drafts (build_tools/draft_eval_independent.json): varied,
frozen, and never part of what a draft is trained on."""

from __future__ import annotations

import hashlib
import itertools
import json
import re

import pytest

from build_tools.distill_data import messages_of
from build_tools.distill_found import FOLLOW_UPS, SELF_INSTRUCT, SELF_INSTRUCT_2, found_prompts, frozen_prompts
from build_tools.distill_prompts import training_prompts
from build_tools.eval_set import INDEPENDENT as EVAL_SET
from build_tools.eval_set import independent_items

from .conftest import ROOT

SHIPPED = ROOT / "build_tools" / "drafts" / "smollm2-135m-distilled" / "provenance.json"
TRAINING_PROMPTS_CHECKED = 20_000  # the shipped draft trained on 6,132 answers of seed 0's stream


def items() -> list[dict]:
    return independent_items()


def texts() -> list[str]:
    return [m["content"] for item in items() for m in item["messages"]]


def shingles(text: str, n: int = 6) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def test_the_set_is_varied():
    found = items()
    assert len(found) >= 40 and len({i["id"] for i in found}) == len(found)
    kinds = {i["kind"] for i in found}
    assert {"multilingual", "multi-turn", "code", "json", "long", "casual", "translation"} <= kinds
    for item in found:
        roles = [m["role"] for m in item["messages"] if m["role"] != "system"]
        assert roles[-1] == "user" and all(a != b for a, b in zip(roles, roles[1:])), item["id"]
    assert sum(any(ord(c) > 127 for c in t) for t in texts()) >= 5  # several languages and scripts
    assert max(len(t.split()) for t in texts()) >= 200  # long inputs


def test_it_shares_no_text_with_the_training_stream():
    """Not one 6-word sequence of any eval message occurs in the first 20,000 training prompts (seed 0, the
    stream the shipped draft trained on), and nothing in the distillation code reads the file. (A first
    version of the set had a coding request that shared 6 words with a training template: this caught it.)"""
    eval_shingles = set().union(*(shingles(t) for t in texts()))
    for prompt in itertools.islice(training_prompts(0), TRAINING_PROMPTS_CHECKED):
        assert not (shingles(prompt["prompt"]) & eval_shingles), prompt["prompt"]
    for source in [*(ROOT / "build_tools").glob("distill*.py"), ROOT / "scripts" / "found_prompts.py"]:
        assert EVAL_SET.name not in source.read_text(), source


def test_it_shares_no_text_with_the_found_prompts():
    """Nor with any of the 12,000 prompts found on a build machine (build_tools/distill_found_prompts.jsonl.gz,
    the `mixed` stream's other half). Fails if, e.g., an eval message is pasted into the found set."""
    eval_shingles = set().union(*(shingles(t) for t in texts()))
    found = found_prompts()
    assert len(found) == 12_000
    for item in found:
        text = "\n".join(m["content"] for m in messages_of(item))
        assert not (shingles(text) & eval_shingles), item["id"]


@pytest.mark.parametrize("frozen", [SELF_INSTRUCT, SELF_INSTRUCT_2], ids=["round 1", "round 2"])
def test_it_shares_no_text_with_the_self_instruct_prompts(frozen):
    """Nor with the user messages the champion wrote itself in either round (scripts/self_instruct_prompts.py,
    which drops any reply sharing a 6-word sequence with this set; this re-checks the frozen files)."""
    eval_shingles = set().union(*(shingles(t) for t in texts()))
    written = frozen_prompts(frozen)
    assert len(written) >= 1000 and len({item["id"] for item in written}) == len(written)
    for item in written:
        assert not (shingles(item["prompt"]) & eval_shingles), item["id"]


def test_it_shares_no_text_with_the_follow_up_chats():
    """Nor with the two-turn chats (scripts/followup_prompts.py: a first turn from the frozen sets, the champion's
    answer, a written follow-up), which end on a user turn after an assistant one. Fails if a follow-up is
    copied from this set's multi-turn chats."""
    eval_shingles = set().union(*(shingles(t) for t in texts()))
    chats = frozen_prompts(FOLLOW_UPS)
    assert len(chats) >= 1000 and len({item["id"] for item in chats}) == len(chats)
    for item in chats:
        roles = [m["role"] for m in item["messages"]]
        assert roles[-2:] == ["assistant", "user"], item["id"]
        for message in item["messages"]:
            assert not (shingles(message["content"]) & eval_shingles), item["id"]


def test_the_shipped_drafts_measurement_is_of_this_exact_file():
    recorded = json.loads(SHIPPED.read_text())["independent_evaluation"]
    assert recorded["sha256"] == hashlib.sha256(EVAL_SET.read_bytes()).hexdigest()
    assert recorded["prompts"] == len(items()) and 0 < recorded["greedy_agreement"] < 1


def test_agreement_after_agreement_counts_streaks_within_an_answer():
    """The auto scheduler's later prior for the draft: of the positions right after one that agreed under the
    entropy stop, the share that agree under it too. Fails if a stopped row counts as agreeing (either side of a
    pair), if pairs run across two answers, or if the denominator is every position."""
    import sys

    sys.path.insert(0, str(ROOT))
    from scripts.draft_eval import after_agreement

    one = [(1.0, 0, True), (1.0, 0, True), (1.0, 0, False), (0.0, 0, True), (1.0, 0, True)]  # hit, hit, stopped, miss
    two = [(0.0, 0, True), (1.0, 0, True)]  # a pair across the two answers (1.0 then 0.0) must not count
    assert after_agreement([one, two]) == (1, 2)
