"""The frozen distillation prompt sources beside the template stream, in fixed orders, so a later run resumes
where an earlier one stopped:

`mixed_prompts(seed)` (`build_tools distill --prompts mixed`): prompts built from text found on a build machine
(frozen by scripts/found_prompts.py into distill_found_prompts.jsonl.gz), two found, then one template prompt.
`self_instruct_prompts(seed)` (`--prompts selfinstruct`): the user turns the champion wrote itself across seed
kinds, subjects and tones (frozen by scripts/self_instruct_prompts.py into distill_selfinstruct_prompts.jsonl.gz),
then two-turn chats that continue answered prompts with a user's follow-up (frozen by scripts/followup_prompts.py
into distill_followup_prompts.jsonl.gz), then a second self-instruct round aimed at the kinds the draft agreed
with least (`--round 2`: distill_selfinstruct2_prompts.jsonl.gz), then the mixed stream.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Iterator

from .distill_prompts import training_prompts

FOUND = Path(__file__).with_name("distill_found_prompts.jsonl.gz")
SELF_INSTRUCT = Path(__file__).with_name("distill_selfinstruct_prompts.jsonl.gz")
SELF_INSTRUCT_2 = Path(__file__).with_name("distill_selfinstruct2_prompts.jsonl.gz")
FOLLOW_UPS = Path(__file__).with_name("distill_followup_prompts.jsonl.gz")
FOUND_PER_TEMPLATE = 2


def frozen_prompts(path: Path) -> list[dict]:
    """A frozen prompt set: [{id, task, prompt | messages, ...}]."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def found_prompts() -> list[dict]:
    return frozen_prompts(FOUND)


def mixed_prompts(seed: int) -> Iterator[dict]:
    """FOUND_PER_TEMPLATE found prompts, then one template prompt, until the found set runs out; then templates."""
    templates = training_prompts(seed)
    for index, item in enumerate(found_prompts()):
        yield item
        if index % FOUND_PER_TEMPLATE == FOUND_PER_TEMPLATE - 1:
            yield next(templates)
    yield from templates


def self_instruct_prompts(seed: int) -> Iterator[dict]:
    """Every self-instruct prompt, every follow-up chat, every second-round self-instruct prompt, then the mixed
    stream (whose answered prompts a resumed run skips)."""
    yield from frozen_prompts(SELF_INSTRUCT)
    yield from frozen_prompts(FOLLOW_UPS)
    yield from frozen_prompts(SELF_INSTRUCT_2)
    yield from mixed_prompts(seed)
