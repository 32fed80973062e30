"""A tokenizer conformance corpus: hand-picked hard strings plus seeded random mixtures."""

from __future__ import annotations

import random
import unicodedata

HAND_PICKED = [
    "",
    " ",
    "\n",
    "Hello world",
    "What is the capital of France?",
    "  leading spaces",
    "trailing spaces   ",
    "a  b   c    d",
    "tabs\tand\t\ttabs",
    "\n\n\nnewlines\n\n",
    "mixed \t \n whitespace \r\n runs",
    "x  \ny",
    "  \n  ",
    "\u3000ideographic\u3000space",
    "nbsp\u00a0here",
    "em\u2003space",
    "zero\u200bwidth",
    "digits 0123456789",
    "3.14159 and 2,718",
    "year 2026-11-29",
    "phone +1 (555) 010-9999",
    "١٢٣ Arabic-Indic",
    "²³ superscripts",
    "Ⅻ roman",
    "½ fractions ¾",
    "it's",
    "I'm",
    "we'll",
    "they'd",
    "you've",
    "we're",
    "DON'T SHOUT",
    "'s 't 're",
    "rock'n'roll",
    "café",
    "naïve",
    "Zoë",
    "Å",
    "e\u0301",
    "cafe\u0301",
    "n\u0303",
    "a\u0308\u0304",
    "\u1e9b\u0323",
    unicodedata.normalize("NFC", "Ångström résumé façade"),
    unicodedata.normalize("NFD", "Ångström résumé façade"),
    unicodedata.normalize("NFD", "한국어 텍스트"),
    unicodedata.normalize("NFC", "한국어 텍스트"),
    "😀",
    "👍🏽",
    "👩🏿‍🔬",
    "👨‍👩‍👧‍👦",
    "🏳️‍🌈",
    "🇫🇷🇩🇪🇯🇵",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "❤️‍🔥",
    "🫶🏻 hands",
    "text😀text",
    "1️⃣ keycap",
    "שלום עולם",
    "مرحبا بالعالم",
    "سلام 123",
    "עברית with English",
    "\u202eRLO override\u202c",
    "\u200fRLM",
    "日本語のテキスト",
    "中文文本，标点。",
    "한국어",
    "ｆｕｌｌｗｉｄｔｈ",
    "漢字かなカナ",
    "Ελληνικά",
    "Русский текст",
    "हिन्दी",
    "ภาษาไทย",
    "def f(x):\n    return x**2  # square\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
    '<div class="x">&amp;</div>',
    "SELECT * FROM t WHERE id = 42;",
    "$ ls -la | grep '\\.py$'",
    '{"key": [1, 2, 3], "nested": {"a": null}}',
    "a->b => c := d",
    "<|im_start|>user\nhi<|im_end|>",
    "text<|im_end|>more",
    "<|im_start|><|im_start|>",
    "<|im_start|",
    "|im_end|>",
    "<|endoftext|>tail",
    "<repo_name>x<file_sep>y<filename>z",
    "<jupyter_code>print(1)<jupyter_output>1",
    "<empty_output>",
    "< |im_start|>",
    "!!!???...",
    "---===+++",
    "((()))[[[]]]",
    "@#$%^&*",
    "~`|\\",
    "«quotes» „low“ ‘single’",
    "…—–",
    "\x00\x01\x02 control",
    "\x7f delete",
    "\ufeffBOM",
    "\ufffd replacement",
    "\U0001f600\U0001f601",
    "surrogate-free 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]

POOLS = [
    "abcdefghijklmnopqrstuvwxyz",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " ",
    "  ",
    "\n",
    "\t",
    ".,;:!?'\"-()",
    "éèêëàâäôöûüçñ",
    "\u0301\u0308\u0327",
    "日本語中文한국",
    "שלוםمرحبا",
    "😀👍🏽👨‍👩‍👧🇫🇷",
    "²³½Ⅻ٣",
    "<|im_start|>",
    "<|im_end|>",
    "'s",
    "'ll",
]


def random_strings(count: int, seed: int = 2026) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            pool = rng.choice(POOLS)
            if pool.startswith("<|") or pool.startswith("'"):
                parts.append(pool)
            else:
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 6))))
        text = "".join(parts)
        if rng.random() < 0.2:
            text = unicodedata.normalize(rng.choice(["NFC", "NFD", "NFKC"]), text)
        out.append(text)
    return out


def corpus() -> list[str]:
    return HAND_PICKED + random_strings(480)
