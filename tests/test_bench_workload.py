"""The bench's frozen workload (build_tools/bench_prompts.json): every stratum the plan lists, three prompts
each, long-context prompts that are long yet fit the page's default context, and its recorded hash."""

from __future__ import annotations

import hashlib
import json

from build_tools.bench import PROMPTS, QUICK_STRATA, workload, workload_sha256
from build_tools.eval_set import INDEPENDENT, independent_items
from pyodide_app.chat_template import ChatTemplate
from pyodide_app.tokenizer import Tokenizer

PAGE_CONTEXT = 2048  # web/app.js default


def test_every_planned_stratum_has_three_prompts():
    strata = json.loads(PROMPTS.read_text())["strata"]
    assert {
        "rewrite",
        "summary",
        "extraction",
        "code",
        "chat",
        "multilingual",
        "repetitive",
        "json",
        "long_context",
        "adversarial",
        "ambiguous",
    } <= set(strata)
    assert all(len(prompts) == 3 and len(set(prompts)) == 3 for prompts in strata.values())
    assert set(QUICK_STRATA) <= set(strata) and "long_context" not in QUICK_STRATA


def test_long_context_prompts_are_long_and_fit_the_page(real_package):
    manifest = json.loads((real_package / "manifest.json").read_text())
    tokenizer = Tokenizer.from_json((real_package / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((real_package / manifest["chat_template"]).read_text())
    for prompt in json.loads(PROMPTS.read_text())["strata"]["long_context"]:
        tokens = len(tokenizer.encode(template.render([{"role": "user", "content": prompt}])))
        assert 1500 <= tokens <= PAGE_CONTEXT - 64, tokens  # room for the bench's answers


def test_the_workload_hash_is_the_files():
    assert workload_sha256() == hashlib.sha256(PROMPTS.read_bytes()).hexdigest()
    assert workload_sha256("independent") == hashlib.sha256(INDEPENDENT.read_bytes()).hexdigest()
    items = workload(["json", "ambiguous"], 2, 1)
    assert [(i["setting"], i["stratum"]) for i in items] == [("greedy", "json")] * 2 + [("greedy", "ambiguous")] * 2 + [
        ("sampled", "json"),
        ("sampled", "ambiguous"),
    ]
    assert all(i["messages"] == [{"role": "user", "content": i["prompt"]}] for i in items)


def test_the_independent_workload_runs_whole_chats_by_kind():
    """--workload independent: the eval set's chats (multi-turn ones whole), its kinds as strata, named by id."""
    items = workload(["multi-turn", "code"], 2, 0, "independent")
    chats = {i["id"]: i for i in independent_items()}
    assert [i["stratum"] for i in items] == ["multi-turn"] * 2 + ["code"] * 2
    for item in items:
        assert (
            item["messages"] == chats[item["prompt"]]["messages"] and chats[item["prompt"]]["kind"] == item["stratum"]
        )
    assert any(len(i["messages"]) > 2 for i in items)  # a multi-turn chat keeps its earlier turns


def test_the_bench_and_the_page_use_the_engines_proposers():
    """One list (pyodide_app/engine.py PROPOSERS): every bench arm runs one of them, every one has an arm,
    and the settings panel offers exactly them (the CLI's choices are the list itself)."""
    import re

    from build_tools.bench import ARMS
    from pyodide_app.engine import PROPOSERS

    from .conftest import ROOT

    arms = {a.proposer for a in ARMS if a.peer is None}
    assert arms == set(PROPOSERS)
    page = (ROOT / "web" / "index.html").read_text()
    select = page[
        page.index('<select name="proposer">') : page.index("</select>", page.index('<select name="proposer">'))
    ]
    assert re.findall(r'<option value="(\w+)"', select) and set(re.findall(r'<option value="(\w+)"', select)) == set(
        PROPOSERS
    )
