"""Freeze a second distillation prompt set built from text found on a Debian build machine.

The first stream (build_tools/distill_prompts.py) is ten task templates over 60 topics: a draft trained
on it agrees with the champion 48% on its own held-out split but 21% on hand-written prompts. This set
varies what those templates cannot:
  topics    everyday subjects (written here) and 63k Debian package summaries (`apt-cache dumpavail`)
  texts     paragraphs of Python's standard-library docstrings (summaries, rewrites, extraction, JSON)
  code      standard-library functions (explain, review, port, test) and requests in five languages
  languages UI messages and country names from the machine's gettext catalogs (es fr de it pt ru zh ja),
            with questions written in those languages
  style     terse, lowercase, typos, polite, system prompts, long inputs
Written once to build_tools/distill_found_prompts.jsonl.gz (a machine without these files can still
train on it); build_tools/distill_found.py reads it. Run: .venv/bin/python scripts/found_prompts.py
"""

from __future__ import annotations

import ast
import gettext
import glob
import gzip
import json
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build_tools" / "distill_found_prompts.jsonl.gz"
COUNT = 12_000

EVERYDAY = """houseplants that keep dying|a first job interview|learning to swim as an adult|saving for a holiday
|a noisy neighbour|making sourdough|running a first 5k|a cat that scratches furniture|choosing a laptop
|cleaning a cast iron pan|writing a cover letter|public speaking nerves|a leaking tap|growing tomatoes
|staying focused while studying|moving to a new city|a birthday party for a six year old|meal prep for a week
|a long flight with kids|learning guitar|a broken phone screen|paying off a credit card|composting at home
|a picky eater|starting a podcast|keeping a journal|fixing a flat bike tyre|a rainy day with nothing to do
|negotiating a salary|a dog that pulls on the lead|the history of pizza|how tides work|why leaves change colour
|how vaccines train the immune system|what a black hole is|how a refrigerator keeps food cold|how bees make honey
|the causes of the First World War|how credit scores work|how airplanes stay in the air|what inflation means
|the life of Marie Curie|how rainbows form|why the sea is salty|how to read a nutrition label|the Silk Road
|what an API is|how passwords get stolen|how to back up photos|what a spreadsheet formula does|cloud storage
|a wedding toast|a thank-you note to a teacher|a complaint about a late delivery|an apology to a friend
|a sick day message to a manager|a poem about autumn rain|a story about a robot that learns to paint
|a limerick about a forgetful wizard|a slogan for a bakery|a name for a hiking club|a riddle for kids
|planning a garden|stretching after exercise|drinking enough water|a morning routine|getting over jet lag
|choosing a used car|renting a first flat|splitting bills with flatmates|tipping in restaurants abroad
|learning a new language|remembering names|dealing with stress at work|making friends in a new town
|a road trip across Scotland|visiting Kyoto|a weekend in Rome|camping in the rain|packing light
|baking bread without yeast|a quick vegetarian dinner|leftover rice|a cheap healthy breakfast|making pancakes
|the rules of chess|how to start knitting|taking better phone photos|a book club|board games for two
|electric bikes|heat pumps|solar panels on a small house|recycling plastics|reducing food waste
|the water cycle|how earthquakes happen|the phases of the moon|why we dream|how memory works
|the French Revolution|ancient Egypt|the printing press|the invention of the telephone|the Apollo missions""".split("|")
EVERYDAY = [t.strip() for t in EVERYDAY if t.strip()]

ASK = [
    "{t}?? any tips",
    "can you help me with {t}",
    "I need advice about {t}. Where do I start?",
    "Quick question about {t}: what do most people get wrong?",
    "Tell me the basics of {t} in a few sentences.",
    "what should i know about {t}",
    "Give me 5 short tips on {t}.",
    "Explain {t} like I'm twelve.",
    "I'm stuck with {t}, any suggestions please?",
    "Could you write a short paragraph about {t}?",
    "What are the pros and cons when it comes to {t}?",
    "Write a checklist for {t}.",
    "Is there a simple way to handle {t}?",
    "Help! {t}. What do I do first?",
    "In two sentences, what is the key thing about {t}?",
    "Make me a step-by-step plan for {t}.",
    "Write something short and funny about {t}.",
    "Describe {t} to someone who has never heard of it.",
    "What questions should I ask before dealing with {t}?",
    "My friend asked me about {t} and I had no idea. What could I have said?",
    "Write three quiz questions about {t}, with answers.",
    "{t} - pls explain",
    "Draft a short message to a friend about {t}.",
    "Compare two ways of approaching {t}.",
]

SOFTWARE_ASK = [
    "What is a {t} and who would use one?",
    "I'm looking for a {t}. What features matter?",
    "Write a one-paragraph product description for a {t}.",
    "Explain in plain words what this software does: {T}",
    "Suggest a name for a new {t}.",
    "What could go wrong when installing a {t}?",
    "Write a short review of a {t} from the point of view of a happy user.",
    "Give me three alternatives to a {t}, described in general terms.",
]

TEXT_TASKS = [
    "Summarise this in one or two sentences:\n\n{x}",
    "Give me the gist of this:\n{x}",
    "Rewrite the following in simpler English:\n\n{x}",
    "Turn this into bullet points:\n{x}",
    "What is the main idea of this paragraph?\n\n{x}",
    "Make this shorter without losing meaning: {x}",
    "Write a title for this text.\n\n{x}",
    "List the technical terms in this text and explain each in a few words:\n\n{x}",
    'Return a JSON object with keys "summary" and "keywords" for this text:\n{x}',
    "Read this and write two questions a student could answer from it.\n\n{x}",
    "Fix any awkward wording in this text and return it:\n{x}",
    "Translate this into Spanish:\n\n{x}",
    "Explain this to a beginner:\n\n{x}",
    "Copy this text, then add one sentence that explains why it matters:\n{x}",
]

LONG_TASKS = [
    "Below are several paragraphs of documentation. Write a short overview for a new team member, then list "
    "three things to remember.\n\n{x}",
    "Here is some reference text. Which parts would confuse a beginner, and why?\n\n{x}",
    "Condense these notes into a five-line summary:\n\n{x}",
]

CODE_TASKS = [
    "What does this function do?\n\n```python\n{c}\n```",
    "Explain this code line by line:\n{c}",
    "Are there any bugs or edge cases in this code?\n\n```python\n{c}\n```",
    "Rewrite this Python function in JavaScript:\n\n```python\n{c}\n```",
    "Add comments to this code.\n\n{c}",
    "Write two unit tests for this function:\n```python\n{c}\n```",
    "Suggest a clearer name for this function and explain why:\n\n{c}",
    "Can this be made simpler?\n```python\n{c}\n```",
]

CODE_REQUESTS = [
    "Write a Python function that {d}.",
    "how do i write something in python that {d}",
    "Implement this in JavaScript: a function that {d}.",
    "Show me a short Go program that {d}.",
    "In Rust, write a function that {d}.",
    "Write a bash script that {d}.",
]

CODE_GOALS = """reverses the words in a sentence|counts how often each word appears in a text file|checks if a string
is a palindrome|removes duplicates from a list while keeping order|reads a CSV file and prints the average of a
column|converts Celsius to Fahrenheit|finds the largest file in a folder|merges two sorted lists|validates an email
address with a simple pattern|returns the n-th Fibonacci number|downloads nothing but prints the current date in ISO
format|groups a list of people by age|splits a list into chunks of size n|capitalises the first letter of each word|
finds the second largest number in a list|checks whether two strings are anagrams|renames files to lowercase|
counts the vowels in a string|computes the factorial of a number|sorts a list of dictionaries by a key|
prints a multiplication table|flips the keys and values of a dictionary|reads a JSON file and prints its keys|
rounds prices to two decimals|tells whether a year is a leap year""".replace("\n", " ").split("|")
CODE_GOALS = [g.strip() for g in CODE_GOALS if g.strip()]

SQL = [
    "Write an SQL query that lists the {n} most recent orders from a table orders(id, placed_at, amount).",
    "SQL: count the users per country in users(id, name, country), largest first.",
    "How do I delete duplicate rows in SQL, keeping the one with the smallest id?",
    "Write a query that joins employees(id, name, dept_id) and departments(id, name) and shows each name "
    "with its department.",
]

# Questions written in the catalog languages; {c} is a country name in that language.
FOREIGN = {
    "es": [
        "¿Qué puedo visitar en {c} si tengo solo tres días?",
        "¿Cuál es la comida típica de {c}?",
        "Explícame en pocas palabras la historia de {c}.",
        "¿Qué significa este mensaje de un programa? «{m}»",
        "Dame tres consejos para aprender inglés rápido.",
    ],
    "fr": [
        "Que faut-il voir en priorité en {c} ?",
        "Quel temps fait-il en général en {c} au printemps ?",
        "Peux-tu m'expliquer ce message d'erreur : « {m} » ?",
        "Écris un petit poème sur la mer.",
        "Comment préparer une bonne soupe de légumes ?",
    ],
    "de": [
        "Was sollte man über {c} wissen, bevor man dorthin reist?",
        "Was bedeutet diese Meldung: „{m}“?",
        "Gib mir drei Tipps, um besser zu schlafen.",
        "Erkläre kurz, wie ein Kühlschrank funktioniert.",
    ],
    "it": [
        "Cosa si mangia di solito in {c}?",
        "Che cosa vuol dire questo messaggio: «{m}»?",
        "Scrivi una breve email per chiedere un giorno di ferie.",
    ],
    "pt_BR": [
        "Quais são os lugares mais bonitos de {c}?",
        'O que significa esta mensagem: "{m}"?',
        "Me dá uma receita fácil de bolo de cenoura.",
    ],
    "ru": ["Расскажи коротко о стране {c}.", "Что означает это сообщение: «{m}»?", "Как быстро выучить новые слова?"],
    "zh_CN": ["请简单介绍一下{c}。", "这个提示是什么意思：“{m}”？", "给我三个保持健康的建议。"],
    "ja": [
        "{c}の有名な食べ物は何ですか？",
        "このメッセージはどういう意味ですか：「{m}」",
        "朝ごはんのおすすめを教えてください。",
    ],
}
TO_ENGLISH = ["Translate to English: {m}", "What does this say in English? {m}", "Translate this {lang} text: {m}"]
FROM_ENGLISH = ["Translate into {lang}: {e}", 'How would you say "{e}" in {lang}?']
LANGUAGE_NAMES = {
    "es": "Spanish",
    "fr": "French",
    "de": "German",
    "it": "Italian",
    "pt_BR": "Portuguese",
    "ru": "Russian",
    "zh_CN": "Chinese",
    "ja": "Japanese",
}

SYSTEMS = [
    "You are a concise assistant. Answer in at most three sentences.",
    "You are a friendly tutor for teenagers.",
    "Reply only with valid JSON.",
    "You are a helpful assistant.",
    "Answer like a patient support agent.",
]

STYLE_REQUESTS = [
    "Repeat after me, word for word: {s}",
    "Say this back to me in capital letters: {s}",
    "Put these words in alphabetical order: {s}",
    "Count the words in this sentence: {s}",
    "Change this to the future tense: {s}",
    "Make this sound more polite: {s}",
    "Write the opposite of this statement: {s}",
]


def debian_summaries() -> list[str]:
    """One-line package summaries: '<name>: <summary>' lines from apt's package lists."""
    listing = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    found = re.findall(r"^Description: (.+)$", listing, re.M)
    return sorted({s.strip() for s in found if 3 <= len(s.split()) <= 12})


def stdlib_modules() -> list[Path]:
    base = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    skip = {"test", "tests", "idlelib", "site-packages", "dist-packages", "lib2to3"}
    return sorted(p for p in base.rglob("*.py") if not skip & set(p.parts))


def docstring_paragraphs(modules: list[Path]) -> list[str]:
    """Prose paragraphs (25-160 words, mostly letters) from module, class and function docstrings."""
    found = []
    for path in modules:
        try:
            tree = ast.parse(path.read_text(errors="ignore"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                doc = ast.get_docstring(node) or ""
                for paragraph in re.split(r"\n\s*\n", doc):
                    words = paragraph.split()
                    letters = sum(c.isalpha() or c.isspace() for c in paragraph) / max(len(paragraph), 1)
                    markup = re.search(r"``|:\w+:|>>>| : ", paragraph)
                    if 25 <= len(words) <= 160 and letters > 0.85 and not markup:
                        found.append(" ".join(words))
    return sorted(set(found))


def small_functions(modules: list[Path]) -> list[str]:
    """Source of top-level or method functions of 5-30 lines, dedented."""
    found = []
    for path in modules:
        text = path.read_text(errors="ignore")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.splitlines()
        for node in ast.walk(tree):
            size = node.end_lineno - node.lineno + 1 if isinstance(node, ast.FunctionDef) else 0
            if 5 <= size <= 30 and not node.name.startswith("test"):
                body = lines[node.lineno - 1 : node.end_lineno]
                indent = len(body[0]) - len(body[0].lstrip())
                found.append("\n".join(line[indent:] for line in body))
    return sorted(set(found))


def catalogs() -> dict[str, list[tuple[str, str]]]:
    """Per language: (English msgid, translated msgstr) pairs of 3-14 words without format codes."""
    pairs = {}
    for lang in LANGUAGE_NAMES:
        found = []
        for path in sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo")):
            try:
                catalog = gettext.GNUTranslations(open(path, "rb"))._catalog
            except Exception:
                continue
            for key, value in catalog.items():
                if isinstance(key, str) and key and isinstance(value, str) and value != key:
                    if 3 <= len(key.split()) <= 14 and not re.search(r"[%{}<>\\_&]|\n", key + value):
                        found.append((key, value))
        pairs[lang] = sorted(set(found))
    return pairs


def countries(lang: str) -> list[str]:
    try:
        catalog = gettext.GNUTranslations(open(f"/usr/share/locale/{lang}/LC_MESSAGES/iso_3166.mo", "rb"))._catalog
    except OSError:
        return []
    return sorted(v for k, v in catalog.items() if isinstance(k, str) and k and isinstance(v, str) and len(v) < 25)


def typo(text: str, rng: random.Random) -> str:
    words = text.split()
    for _ in range(max(1, len(words) // 8)):
        i = rng.randrange(len(words))
        if len(words[i]) > 4:
            j = rng.randrange(1, len(words[i]) - 1)
            words[i] = words[i][:j] + words[i][j + 1 :]
    return " ".join(words)


def styled(prompt: str, rng: random.Random) -> str:
    """The same request as different users type it."""
    roll = rng.random()
    if roll < 0.15:
        return prompt.lower().rstrip(".?!")
    if roll < 0.25:
        return typo(prompt, rng)
    if roll < 0.32:
        return rng.choice(["Please, ", "Hi! ", "hey, ", "Quick one: "]) + prompt[0].lower() + prompt[1:]
    return prompt


def make(kind: str, rng: random.Random, src: dict) -> dict:
    """One prompt item {task, prompt | messages} of the given kind."""
    if kind == "everyday":
        return {"prompt": styled(rng.choice(ASK).format(t=rng.choice(EVERYDAY)), rng)}
    if kind == "software":
        summary = rng.choice(src["debian"])
        return {"prompt": rng.choice(SOFTWARE_ASK).format(t=summary[0].lower() + summary[1:], T=summary)}
    if kind == "text":
        return {"prompt": rng.choice(TEXT_TASKS).format(x=rng.choice(src["paragraphs"]))}
    if kind == "long":
        text = "\n\n".join(rng.sample(src["paragraphs"], rng.randint(3, 6)))
        return {"prompt": rng.choice(LONG_TASKS).format(x=text)}
    if kind == "code":
        return {"prompt": rng.choice(CODE_TASKS).format(c=rng.choice(src["functions"]))}
    if kind == "code-request":
        if rng.random() < 0.2:
            return {"prompt": rng.choice(SQL).format(n=rng.randint(3, 20))}
        return {"prompt": styled(rng.choice(CODE_REQUESTS).format(d=rng.choice(CODE_GOALS)), rng)}
    if kind == "foreign":
        lang = rng.choice([lang for lang in FOREIGN if src["pairs"][lang]])
        english, message = rng.choice(src["pairs"][lang])
        place = rng.choice(src["countries"][lang] or ["?"])
        roll = rng.random()
        if roll < 0.5:
            return {"prompt": rng.choice(FOREIGN[lang]).format(c=place, m=message)}
        if roll < 0.75:
            return {"prompt": rng.choice(TO_ENGLISH).format(m=message, lang=LANGUAGE_NAMES[lang])}
        return {"prompt": rng.choice(FROM_ENGLISH).format(e=english, lang=LANGUAGE_NAMES[lang])}
    if kind == "system":
        user = make(rng.choice(["everyday", "software", "text"]), rng, src)["prompt"]
        return {"messages": [{"role": "system", "content": rng.choice(SYSTEMS)}, {"role": "user", "content": user}]}
    if kind == "style":
        english = rng.choice(src["pairs"]["fr"])[0] if rng.random() < 0.5 else rng.choice(src["debian"])
        return {"prompt": rng.choice(STYLE_REQUESTS).format(s=english)}
    raise ValueError(kind)


MIX = {  # kind -> share of the set
    "everyday": 0.30,
    "software": 0.10,
    "text": 0.14,
    "long": 0.04,
    "code": 0.10,
    "code-request": 0.08,
    "foreign": 0.12,
    "system": 0.06,
    "style": 0.06,
}


def main() -> None:
    modules = stdlib_modules()
    src = {
        "debian": debian_summaries(),
        "paragraphs": docstring_paragraphs(modules),
        "functions": small_functions(modules),
        "pairs": catalogs(),
        "countries": {lang: countries(lang) for lang in LANGUAGE_NAMES},
    }
    print({k: len(v) for k, v in src.items()}, {lang: len(p) for lang, p in src["pairs"].items()})
    rng = random.Random(20261201)
    kinds, weights = zip(*MIX.items())
    with gzip.open(OUT, "wt", encoding="utf-8") as out:
        for index in range(COUNT):
            kind = rng.choices(kinds, weights)[0]
            out.write(json.dumps({"id": f"found-{index}", "task": kind, **make(kind, rng, src)}, ensure_ascii=False))
            out.write("\n")
    print(f"{COUNT} prompts -> {OUT} ({OUT.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
