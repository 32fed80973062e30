"""Golden vectors from the numpy reference: greedy tokens and top logits for a few chat prompts."""

from __future__ import annotations

import numpy as np

from pyodide_app.chat_template import ChatTemplate
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
    return {"reference": "numpy float32 (build_tools/reference.py)", "cases": cases}
