"""Freeze a third distillation prompt set: user messages written by the champion itself (self-instruct).

The two earlier streams are templates (build_tools/distill_prompts.py) and text found on a build machine
(scripts/found_prompts.py); a draft trained on them agrees with the champion 49% on the template split but
26.5% on hand-written prompts (build_tools/draft_eval_independent.json). Here the champion writes the user's
side: a system message states who the user is and what they want (a seed of kind of request, subject and
tone), then the chat is left open at the start of a user turn, and the champion (temperature 0.8, top-p
0.95) writes that turn up to its end marker. (Asked instead, as the assistant, to "write a message a user
might send", SmolLM2-135M mostly answered in its own voice or described the request.) A reply is kept if it
is 15-400 characters, mostly letters, free of a short list of offensive words, not a repeat, and shares no
6-word sequence with the independent evaluation set (checked again by tests/test_draft_eval.py).

Written once to build_tools/distill_selfinstruct_prompts.jsonl.gz ({id, task, prompt, seed}); answering and
training on it is `build_tools distill` work. Run (about 2.5 replies/s on this 2-core machine):

    .venv/bin/python scripts/self_instruct_prompts.py [--minutes 30] [--seed 0]

Round 2 (`--round 2`, into distill_selfinstruct2_prompts.jsonl.gz, ids si2-N) asks for the kinds the shipped
draft agreed with least on the independent set (structured 11%, creative 18%, multilingual 27%, explanation 28%,
summary 29%, long inputs 31%): tables and bullet points from given rows or text, stories and short poems,
messages written in other languages, why- and how-questions and worked calculations, notes, passages and code
pasted in with a question (replies up to 900 characters, 240 tokens). The frozen file: 1,096 replies kept of
1,285, from `--round 2 --seed 2 --minutes 11 --keep DIR` and the same command with `--minutes 8.5` resumed in DIR
(2026-12-03; about 1 reply/s, 93 tokens/s: every reply is sampled, so the sampler dominates).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from build_tools.distill_data import generate  # noqa: E402
from build_tools.distill_found import SELF_INSTRUCT, SELF_INSTRUCT_2  # noqa: E402
from build_tools.distill_train import load_answers  # noqa: E402
from build_tools.eval_set import independent_items  # noqa: E402
from build_tools.recipes import default_package  # noqa: E402
from pyodide_app.package_check import load_manifest  # noqa: E402
from pyodide_app.tokenizer import Tokenizer  # noqa: E402
from scripts.found_prompts import EVERYDAY  # noqa: E402

OUT = SELF_INSTRUCT  # what `build_tools distill --prompts selfinstruct` answers

KINDS = {  # kind -> what the champion is asked to write
    "question": "a question someone might ask an AI assistant about {subject}",
    "howto": "a request for step-by-step help with {subject}",
    "explain": "a request to explain something about {subject} to a beginner",
    "opinion": "a message asking an assistant for advice about {subject}",
    "rewrite": "a request to rewrite, shorten or fix a short paragraph about {subject}, including the paragraph",
    "summary": "a request to summarise a few sentences about {subject}, including the sentences",
    "extract": "a request to pull names, dates or numbers out of a short text about {subject}, including the text",
    "list": "a request for a list of ideas related to {subject}",
    "code": "a request for a small program or function that helps with {subject}",
    "json": "a request to describe {subject} as JSON with given fields",
    "email": "a request to write a short email or message about {subject}",
    "compare": "a question comparing two options related to {subject}",
    "creative": "a request for a short story, poem or slogan about {subject}",
    "translate": "a request to translate a sentence about {subject} into another language, including the sentence",
}
KINDS_2 = {  # round 2: the kinds the shipped draft agreed with least on the independent set
    "table": "a request to turn a few comma-separated rows about {subject} into a table, including the rows",
    "bullets": "a request to turn a paragraph about {subject} into bullet points, including the paragraph",
    "format": "a request to reformat a short list about {subject} as numbered steps or a checklist, including it",
    "story": "a request for the opening of a short story involving {subject}, with a word limit",
    "poem": "a request for a haiku, a limerick or a short rhyming poem about {subject}",
    "foreign": "a question about {subject} written in {language}",
    "foreign-task": "a request written in {language} for a short email or note about {subject}",
    "idiom": "a question about what a saying or phrase in {language} means and when to use it",
    "why": "a question asking why something happens or how it works, related to {subject}",
    "calculate": "a small arithmetic or unit conversion question about {subject} that asks to show the working",
    "notes": "a request to summarise several lines of meeting notes about {subject} and list the action items, "
    "including the notes",
    "passage": "a question about a paragraph on {subject} that asks what reasons it gives, including the paragraph",
    "review": "a request to check a short piece of code related to {subject} for mistakes, including the code",
    "one-line": "a request to summarise a few sentences about {subject} in one sentence, including the sentences",
}
LANGUAGES_2 = ("Spanish", "French", "German", "Portuguese", "Italian", "Dutch", "Chinese", "Japanese")
ROUNDS = {  # round -> (kinds, the frozen file, id prefix, longest reply kept in characters, reply token cap)
    1: (KINDS, OUT, "si", 400, 96),
    2: (KINDS_2, SELF_INSTRUCT_2, "si2", 900, 240),
}
TONES = (
    "casual",
    "polite",
    "terse",
    "curious",
    "worried",
    "formal",
    "enthusiastic",
    "confused",
    "in lowercase with no punctuation",
    "from a student",
    "from a busy parent",
    "from a small business owner",
    "from a programmer",
    "from a teacher",
)
EXAMPLES = """Here are messages that people send to an AI assistant:
- How do I keep basil alive on a windowsill?
- can u explain what inflation is in simple words
- Write a short poem about the sea for my daughter's birthday.
- Here is my cover letter, please make it sound more confident: I am applying for the role of ...
- What's the difference between a virus and a bacterium?
"""
MORE_SUBJECTS = """the solar system|saving money|a job application|sleep|climate change|a dinner party|learning Spanish
|a spreadsheet|a road trip|a sore back|a garden|photography|a chess opening|a science fair project|a wedding speech
|renting an apartment|a resume|a marathon|recycling|a history essay|machine learning|a birthday gift|meditation
|a broken washing machine|taxes|a video game|a book club|a puppy|a job offer|electric cars|the Roman Empire
|volcanoes|a budget|a coffee shop|password security|a first date|a science lesson|a football team|a podcast"""


def subjects() -> list[str]:
    more = [s.strip() for s in MORE_SUBJECTS.replace("\n", "").split("|")]
    return sorted({s for s in [*EVERYDAY, *more] if s})


def requests(seed: int, round_: int = 1):
    """Endless {id, task, prompt, seed} items asking the champion for one user message each."""
    rng = random.Random(seed)
    table, _, prefix, _, _ = ROUNDS[round_]
    topics, kinds = subjects(), sorted(table)
    index = 0
    while True:
        kind, subject, tone = rng.choice(kinds), rng.choice(topics), rng.choice(TONES)
        language = rng.choice(LANGUAGES_2) if round_ > 1 else None
        ask = table[kind].format(subject=subject, language=language)
        prompt = f"You are talking with a user who is {tone}. The user's next message is {ask}."
        named = "{language}" in table[kind]
        chosen = {"kind": kind, "subject": subject, "tone": tone, **({"language": language} if named else {})}
        yield {"id": f"{prefix}-{index}", "task": f"self_instruct/{kind}", "prompt": prompt, "seed": chosen}
        index += 1


OFFENSIVE = re.compile(
    r"\b(?:bitch|fuck\w*|shit\w*|sex\w*|virgin\w*|porn\w*|nude|rape\w*|nazi\w*|kill yourself)\b", re.I
)
LABEL = re.compile(r"^(?:\*\*)?(?:user(?:'s)? message|message|question|request|user|prompt)\s*:\s*(?:\*\*)?\s*", re.I)


def clean(text: str, longest: int = 400) -> str | None:
    """The message the champion wrote, or None when it is not one."""
    text = text.strip()
    text = LABEL.sub("", text).strip()
    for cut in ("\n\nAnswer", "\nAnswer:", "\n\nAssistant", "\nAssistant:", "\n\nResponse", "\n\nSure"):
        text = text.split(cut)[0].strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    letters = sum(c.isalpha() or c.isspace() for c in text)
    if not 15 <= len(text) <= longest or letters < 0.7 * len(text) or OFFENSIVE.search(text):
        return None
    return text


def six_grams(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + 6]) for i in range(len(words) - 5)}


def evaluation_six_grams() -> set[tuple[str, ...]]:
    grams: set[tuple[str, ...]] = set()
    for item in independent_items():
        for message in item["messages"]:
            grams |= six_grams(message["content"])
    return grams


def user_turn_encoder(package: Path, manifest: dict):
    """messages -> token ids of the chat as a system message (the seed) followed by an open user turn: the
    champion writes the user's message itself, in a user's voice, up to its end-of-turn token."""
    from pyodide_app.chat_template import ChatTemplate

    tokenizer = Tokenizer.from_json((package / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((package / manifest["chat_template"]).read_text())
    return lambda messages: tokenizer.encode(
        template.render([{"role": "system", "content": messages[0]["content"]}], add_generation_prompt=False)
        + "<|im_start|>user\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--round", type=int, choices=sorted(ROUNDS), default=1)
    parser.add_argument("--keep", type=Path, help="keep the champion's raw replies in this folder")
    args = parser.parse_args()
    package = default_package()
    manifest = load_manifest(package)
    tokenizer = Tokenizer.from_json((package / manifest["tokenizer"]).read_text())
    _, out, _, longest, reply_tokens = ROUNDS[args.round]
    folder = args.keep or Path(tempfile.mkdtemp()) / "replies"
    report = generate(
        package,
        folder,
        requests(args.seed, args.round),
        user_turn_encoder(package, manifest),
        args.minutes,
        max_tokens=reply_tokens,
        seed=args.seed,
        sampled_every=1,
    )
    print(f"[self-instruct] {report}")
    seeds = {item["id"]: item for item, _ in zip(requests(args.seed, args.round), range(report["total_answers"] * 2))}
    banned, seen, kept = evaluation_six_grams(), set(), []
    eos = set(manifest["generation"]["eos_ids"])
    for answer in sorted(load_answers(folder), key=lambda a: int(a.id.split("-")[1])):
        reply = [int(t) for t in answer.sequence[answer.prompt_len :] if int(t) not in eos]
        text = clean(tokenizer.decode(reply), longest)
        if text is None or text.lower() in seen or six_grams(text) & banned:
            continue
        seen.add(text.lower())
        item = seeds[answer.id]
        kept.append({"id": answer.id, "task": item["task"], "prompt": text, "seed": item["seed"]})
    with gzip.open(out, "wt", encoding="utf-8") as lines:
        for row in kept:
            lines.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"[self-instruct] kept {len(kept)} of {report['total_answers']} replies -> {out.relative_to(ROOT)}")
    if args.keep is None:
        shutil.rmtree(folder.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
