"""Golden vectors from the numpy reference: greedy tokens and top logits for a few chat prompts; and the
self-test's recorded answers (pyodide_app/self_test.py): Philox words and verify decisions on fixtures."""

from __future__ import annotations

import numpy as np

from pyodide_app.champion import decide
from pyodide_app.chat_template import ChatTemplate
from pyodide_app.rng import Domain, PhiloxStream, philox4x32_10
from pyodide_app.self_test import fixture_request
from pyodide_app.tokenizer import Tokenizer

from .reference import ReferenceModel
from .source import ModelSource

GOLDEN_PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {
            "role": "user",
            "content": "Rewrite in the past tense: The cat sits on the mat and watches the birds in the garden.",
        }
    ],
    [{"role": "user", "content": "Write a Python function that returns the sum of a list of numbers."}],
]
GREEDY_STEPS = 32
LOGIT_STEPS = 4
TOP = 8


def golden_vectors(source: ModelSource, prompts=GOLDEN_PROMPTS, steps: int = GREEDY_STEPS) -> dict:
    tokenizer = Tokenizer.from_data(source.tokenizer)
    template = ChatTemplate.from_jinja(source.chat_template)
    model = ReferenceModel(source.config, source.tensors)
    eos = {source.tokenizer["eos_id"]}
    cases = []
    for messages in prompts:
        prompt = tokenizer.encode(template.render(messages))
        cache = model.new_cache(len(prompt) + steps)
        logits = model.forward(prompt, cache, 0)[-1]
        greedy, top = [], []
        for step in range(steps):
            order = np.argsort(-logits, kind="stable")[:TOP]
            if step < LOGIT_STEPS:
                top.append([[int(i), float(logits[i])] for i in order])
            token = int(order[0])
            greedy.append(token)
            if token in eos or step == steps - 1:
                break
            logits = model.forward([token], cache, len(prompt) + step)[-1]
        cases.append(
            {
                "messages": messages,
                "prompt_ids": prompt,
                "greedy": greedy,
                "top_logits": top,
                "text": tokenizer.decode(greedy),
            }
        )
    return {
        "reference": "numpy float32 (build_tools/reference.py)",
        "cases": cases,
        "philox": philox_cases(),
        "verify": verify_fixtures(source.config.vocab_size),
    }


# Random123's kat_vectors for philox4x32 with 10 rounds: counter(4), key(2) -> words(4).
RANDOM123_KNOWN_ANSWERS = [
    (
        (0x00000000, 0x00000000, 0x00000000, 0x00000000),
        (0x00000000, 0x00000000),
        (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8),
    ),
    (
        (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
        (0xFFFFFFFF, 0xFFFFFFFF),
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def philox_cases() -> list[dict]:
    """The published known answers, then counters laid out as the verifier draws them (round, position,
    domain, 0) under a 64-bit seed."""
    cases = [{"counter": list(c), "key": list(k), "words": list(w)} for c, k, w in RANDOM123_KNOWN_ANSWERS]
    key = PhiloxStream(0x0123456789ABCDEF).key
    for round_index, position, domain in (
        (0, 0, Domain.ACCEPT_UNIFORM),
        (7, 3, Domain.CORRECTION_SAMPLE),
        (1 << 20, 0, Domain.TOKEN_SAMPLE),
    ):
        counter = (round_index, position, int(domain), 0)
        cases.append({"counter": list(counter), "key": list(key), "words": list(philox4x32_10(counter, key))})
    return cases


def _sparse(logits: dict[int, float]) -> list[list]:
    return [[token, value] for token, value in logits.items()]


def verify_fixtures(vocab: int) -> list[dict]:
    """Verify fixtures (self_test.py's format) with the decisions the Python verifier takes on them: greedy
    acceptance and correction, plain sampling under every processor, point-mass and full draft rows whose
    rejections resample from the residual (a verifier that resampled from the target would differ)."""
    target = {10: 2.0, 11: 1.5, 12: 1.0, 13: 0.5, 14: -1.0}  # token -> logit; every other token at the floor
    plain = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "repetition_penalty": 1.0}
    cases = []

    def add(name, rows, drafts, q, settings, seed=0, round_index=0, context=(1, 2, 3)):
        cases.append(
            {
                "name": name,
                "rows": [_sparse(r) for r in rows],
                "floor": -30.0,
                "context": list(context),
                "drafts": list(drafts),
                "q": q,
                "settings": {**plain, **settings},
                "seed": seed,
                "round": round_index,
            }
        )

    greedy = {"temperature": 0}
    add(
        "greedy: two drafts accepted, then a correction",
        [{10: 3.0}, {11: 3.0}, {14: 3.0}, {}],
        (10, 11, 12),
        None,
        greedy,
    )
    add("greedy: all drafts accepted, then the bonus", [{12: 1.0}, {13: 1.0}, {11: 1.0}], (12, 13), None, greedy)
    for seed, settings in enumerate(
        (
            {},
            {"temperature": 0.8, "top_p": 0.9},
            {"top_k": 3, "repetition_penalty": 1.5},
            {"temperature": 0.5, "top_p": 0.5},
        )
    ):
        add(f"sampling without drafts {settings}", [target], (), None, settings, seed=100 + seed, context=(1, 10, 3))
    for seed in range(6):  # p(10) ~ 0.53: about half of these reject the point-mass draft 10
        add("point-mass drafts", [target] * 4, (10, 10, 10), "point", {}, seed=200 + seed, round_index=seed)
    q = _sparse({10: 0.2, 11: 0.2, 13: 0.6})  # over-proposes 13 (p ~ 0.07): mostly rejected
    for seed in range(4):
        add("full draft rows", [target] * 3, (13, 11), [q, q], {"temperature": 0.8}, seed=300 + seed, round_index=seed)
    for case in cases:
        rows, request = fixture_request(case, vocab)
        decision = decide(rows, request)
        case["expected"] = {"accepted": decision.accepted, "terminal": decision.terminal, "kind": decision.kind}
    return cases
