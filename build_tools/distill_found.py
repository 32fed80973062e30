"""The second distillation prompt source: prompts built from text found on a build machine (frozen by
scripts/found_prompts.py into distill_found_prompts.jsonl.gz), mixed with the template stream.

`mixed_prompts(seed)` is what `build_tools distill --prompts mixed` answers: two found prompts, then one
template prompt, in a fixed order, so a later run resumes where an earlier one stopped.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Iterator

from .distill_prompts import training_prompts

FOUND = Path(__file__).with_name("distill_found_prompts.jsonl.gz")
FOUND_PER_TEMPLATE = 2


def found_prompts() -> list[dict]:
    """The frozen found set: [{id, task, prompt | messages}]."""
    with gzip.open(FOUND, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def mixed_prompts(seed: int) -> Iterator[dict]:
    """FOUND_PER_TEMPLATE found prompts, then one template prompt, until the found set runs out; then templates."""
    templates = training_prompts(seed)
    for index, item in enumerate(found_prompts()):
        yield item
        if index % FOUND_PER_TEMPLATE == FOUND_PER_TEMPLATE - 1:
            yield next(templates)
    yield from templates
