"""Freeze a fourth distillation prompt set: two-turn chats, the champion's own first answer followed by a
user's follow-up.

Every earlier stream asks one question; users continue chats ("shorter please", "now in Spanish", "add
comments to the code"), and the champion's answer to a follow-up reads the whole chat. Here each first
turn is a prompt the shipped draft's data already answered (the frozen self-instruct and found prompts
whose stored answer, build_tools/drafts/smollm2-135m-distilled/answers.npz, ended with an end-of-turn
token — a truncated answer would be an odd history), its assistant turn is that answer decoded, and the
follow-up is one of GENERAL and BY_KIND (general ones for any request, plus ones for the request's kind):
FOLLOW_UPS_PER_CHAT different ones per first turn, chosen by a hash of its id. The follow-ups were written
for this file, not taken from the independent evaluation set; an item sharing a 6-word sequence with that
set is dropped (tests/test_draft_eval.py re-checks the file).

Written once to build_tools/distill_followup_prompts.jsonl.gz ({id, task, messages}), from the answers.npz of
the 4-layer draft of commit 8193336 (8,266 answers; a later answers.npz, which holds more found-prompt answers,
gives more chats); `build_tools distill --prompts selfinstruct` answers it after the self-instruct prompts. Runs
in seconds:

    .venv/bin/python scripts/followup_prompts.py
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from build_tools.distill_data import messages_of, read_token_archive  # noqa: E402
from build_tools.distill_found import FOLLOW_UPS as OUT  # noqa: E402
from build_tools.distill_found import SELF_INSTRUCT, found_prompts, frozen_prompts  # noqa: E402
from build_tools.recipes import default_package  # noqa: E402
from pyodide_app.package_check import load_manifest  # noqa: E402
from pyodide_app.tokenizer import Tokenizer  # noqa: E402
from scripts.self_instruct_prompts import evaluation_six_grams, six_grams  # noqa: E402

ANSWERS = ROOT / "build_tools" / "drafts" / "smollm2-135m-distilled" / "answers.npz"

GENERAL = (
    "Thanks! Can you make that shorter?",
    "can you explain that more simply",
    "Why?",
    "Could you give me a concrete example?",
    "What would you do in my place?",
    "Can you put that as a bulleted list?",
    "ok. what's the single most important point?",
    "That's too long, give me the short version please.",
    "Hmm, I'm not sure that's right. Can you double-check it?",
    "Can you expand on the second point?",
    "What are the downsides?",
    "How long would all of that take?",
    "Is there a cheaper option?",
    "Great, now sum it up in one sentence.",
    "Can you make it sound friendlier?",
    "Make it more formal please.",
    "What should I do first?",
    "I don't get the last part.",
    "Can you turn that into a checklist?",
    "Write that as a short message to my team.",
    "What questions should I ask before starting?",
    "thanks!! one more thing: how do I explain this to a 10 year old?",
    "Could you write a title for this?",
    "Give me three alternatives.",
    "Now as a table with two columns.",
    "What mistakes do people usually make here?",
    "Can you give me a quiz question about this?",
    'Put that in JSON with the keys "summary" and "points".',
    "ok but what if I only have 10 minutes?",
    "Can you rewrite it as a LinkedIn post?",
    "Can you be more specific?",
    "Where can I learn more about this?",
    "Is that true for everyone?",
    "sorry, what was the main idea again?",
    "So is the answer yes or no?",
    "What's a good analogy for this?",
    "Cool. Now write a haiku about it.",
    "Can you number the steps?",
    "How would a complete beginner start?",
    "Explain it as if I were an expert instead.",
    "What did you mean by that?",
    "can u fix the spelling and grammar in what you wrote",
    "Add an emoji to each line.",
    "What's the difference between the first option and the last one?",
    "Perfect, thank you. Anything else I should know?",
    "my friend says the opposite. who is right?",
    "Can you give me the pros and cons?",
    "I tried that and it didn't work. What now?",
    "¿Puedes explicarlo en español?",
    "Peux-tu résumer ta réponse en français ?",
    "Kannst du das bitte auf Deutsch sagen?",
    "Puoi tradurre la tua risposta in italiano?",
    "Translate your answer into Portuguese, please.",
    "Write it again but for a child.",
    "What's the history behind this?",
    "Give me a step-by-step plan for this week.",
)
BY_KIND = {  # the first turn's kind (its task, self-instruct or found) -> follow-ups that suit it
    "code": (
        "Can you add comments to the code?",
        "How do I run this?",
        "Write a unit test for it.",
        "What's the time complexity?",
        "Can you do it in JavaScript instead?",
        "Rewrite it without any libraries.",
        "It fails when the input is empty. Can you fix that?",
        "Make it a function that takes the list as an argument.",
        "Can you make it faster?",
        "Explain the code line by line.",
        "Add type hints please.",
        "what does the second line do",
    ),
    "translate": (
        "Now into German please.",
        "And in Japanese?",
        "Is there a more casual way to say it?",
        "How do you pronounce that?",
        "Translate it back into English, word for word.",
    ),
    "creative": (
        "Make it rhyme.",
        "Make it funnier.",
        "Write a second verse.",
        "Give it a happy ending.",
        "Shorter, please: four lines at most.",
        "Now tell it from the cat's point of view.",
    ),
    "email": (
        "Make it more polite.",
        "Add a subject line.",
        "Make it sound less stiff.",
        "Sign it from Alex.",
        "Can you cut it to three sentences?",
    ),
    "json": (
        "Add a field for the date.",
        "Now give the result as CSV.",
        "Only keep the names.",
        "Can you validate that JSON?",
        "Use snake_case for the keys.",
    ),
    "list": (
        "Give me five more.",
        "Which one is the best?",
        "Rank them from easiest to hardest.",
        "Which of these is cheapest?",
    ),
}
KIND_OF_TASK = {  # task name fragments -> BY_KIND key
    "code": "code",
    "software": "code",
    "translate": "translate",
    "foreign": "translate",
    "creative": "creative",
    "email": "email",
    "json": "json",
    "extract": "json",
    "list": "list",
}


FOLLOW_UPS_PER_CHAT = 2


def follow_ups(task: str, item_id: str) -> list[str]:
    """FOLLOW_UPS_PER_CHAT different follow-ups for a first turn of this task (general or the kind's own),
    by a hash of its id."""
    kind = next((k for fragment, k in KIND_OF_TASK.items() if fragment in task), None)
    choices = GENERAL + BY_KIND.get(kind, ())
    first = zlib.crc32(item_id.encode()) % len(choices)
    step = 1 + zlib.crc32(item_id.encode()[::-1]) % (len(choices) - 1)  # never 0 mod len: a different one
    return [choices[(first + n * step) % len(choices)] for n in range(FOLLOW_UPS_PER_CHAT)]


def stored_answers() -> dict[str, tuple[str, list[int]]]:
    """answers.npz -> {id: (task, answer token ids)}."""
    return {
        meta["id"]: (meta["task"], sequence[length:].tolist()) for meta, sequence, length in read_token_archive(ANSWERS)
    }


def main() -> None:
    package = default_package()
    manifest = load_manifest(package)
    tokenizer = Tokenizer.from_json((package / manifest["tokenizer"]).read_text())
    eos = set(manifest["generation"]["eos_ids"])
    answers = stored_answers()
    banned, kept = evaluation_six_grams(), []
    for first in [*frozen_prompts(SELF_INSTRUCT), *found_prompts()]:
        if first["id"] not in answers:
            continue
        task, answer = answers[first["id"]]
        if not answer or answer[-1] not in eos:
            continue
        reply = tokenizer.decode([t for t in answer if t not in eos]).strip()
        for n, text in enumerate(follow_ups(task, first["id"])):
            messages = [*messages_of(first), {"role": "assistant", "content": reply}, {"role": "user", "content": text}]
            if not any(six_grams(m["content"]) & banned for m in messages):
                kept.append({"id": f"fu{n}-{first['id']}", "task": f"followup/{task}", "messages": messages})
    with gzip.open(OUT, "wt", encoding="utf-8") as out:
        for row in kept:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"[follow-ups] {len(kept)} two-turn chats -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
