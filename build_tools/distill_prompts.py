"""Prompts for distilling the neural draft: templates over topics x task types.

Training and evaluation use disjoint topic lists, so no evaluation prompt (nor its topic) is ever
trained on. `evaluation_prompts()` is fixed and committed with the draft's provenance (its hash);
`training_prompts(seed)` is an endless, reproducible stream.

Tasks that work over "a given text" take one of the short texts below, so the draft also learns
the copy-heavy answers (rewrites, extractions) that prompt lookup handles well.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Iterator

TRAIN_TOPICS = [
    "volcanoes",
    "the moon",
    "honeybees",
    "bread baking",
    "the Roman empire",
    "electric cars",
    "rainforests",
    "chess",
    "the human heart",
    "photosynthesis",
    "jazz music",
    "the internet",
    "recycling",
    "sleep",
    "coffee",
    "the ocean tides",
    "earthquakes",
    "solar panels",
    "dinosaurs",
    "vaccines",
    "the printing press",
    "bicycles",
    "climate change",
    "the stock market",
    "origami",
    "black holes",
    "the Great Wall of China",
    "penguins",
    "gardening",
    "friendship",
    "time management",
    "the water cycle",
    "ancient Egypt",
    "machine learning",
    "public libraries",
    "mountains",
    "marathons",
    "tea ceremonies",
    "the piano",
    "wind energy",
    "bees and flowers",
    "city parks",
    "deserts",
    "cheese",
    "the immune system",
    "trains",
    "ice cream",
    "lighthouses",
    "the Olympic games",
    "rain",
    "smartphones",
    "owls",
    "painting with watercolors",
    "saving money",
    "learning a language",
    "camping",
    "birthdays",
    "the Amazon river",
    "glaciers",
    "robots",
    "football",
    "yoga",
    "the solar system",
    "mushrooms",
    "airplanes",
    "museums",
    "the desert fox",
]
EVAL_TOPICS = [
    "lightning",
    "coral reefs",
    "the violin",
    "submarines",
    "maple syrup",
    "the Silk Road",
    "kangaroos",
    "snowflakes",
    "bridges",
    "board games",
    "the microscope",
    "hot air balloons",
]
NAMES = ["Alice", "Bob", "Carol", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam"]
LANGUAGES = ["French", "Spanish", "German", "Italian"]
CODE_TASKS = [
    "returns the largest number in a list",
    "checks whether a string is a palindrome",
    "counts the vowels in a string",
    "returns the factorial of n",
    "reverses a list",
    "removes duplicates from a list",
    "returns the average of a list",
    "converts Celsius to Fahrenheit",
    "finds the second smallest number in a list",
    "counts words in a sentence",
    "returns the n-th Fibonacci number",
    "merges two sorted lists",
]
EVAL_CODE_TASKS = [
    "returns the product of a list of numbers",
    "capitalizes every word in a sentence",
    "checks whether a number is prime",
]  # held out like EVAL_TOPICS (code prompts name no topic)
CODE_LANGUAGES = ["Python", "JavaScript"]


def _text(topic: str, rng: random.Random) -> str:
    """A short given text about the topic, for rewrite / summary / extraction tasks."""
    a, b = rng.sample(NAMES, 2)
    year = rng.randint(1950, 2024)
    count = rng.randint(3, 90)
    return rng.choice(
        [
            f"In {year}, {a} started a small club about {topic}. Within {count} weeks, the club had grown, and {b} "
            "offered "
            f"to organize monthly meetings where members could share what they had learned about {topic}.",
            f"{a} wrote a report on {topic} for school. The report had {count} pages and explained why {topic} "
            "matters. "
            f"{b} read it and said it was the clearest explanation they had seen since {year}.",
            f"The museum opened a new exhibition about {topic} in {year}. It shows {count} objects, and the guide, "
            f"{a}, "
            f"says that most visitors stay for about an hour. {b} designed the posters.",
        ]
    )


def _typo(text: str, rng: random.Random) -> str:
    words = text.split()
    for _ in range(3):
        i = rng.randrange(len(words))
        w = words[i]
        if len(w) > 4:
            j = rng.randrange(1, len(w) - 1)
            words[i] = w[:j] + w[j + 1 :]
    return " ".join(words)


def make_prompt(task: str, topic: str, rng: random.Random) -> str:
    """One user message of the given task type about the topic."""
    if task == "question":
        return rng.choice(
            [
                f"What is {topic}?",
                f"Why is {topic} important?",
                f"What are three facts about {topic}?",
                f"How does {topic} affect everyday life?",
            ]
        )
    if task == "explain":
        return rng.choice(
            [
                f"Explain {topic} to a ten-year-old.",
                f"Explain {topic} in simple words.",
                f"Give a short explanation of {topic}.",
            ]
        )
    if task == "howto":
        return rng.choice(
            [
                f"How can I learn more about {topic}?",
                f"Give me step-by-step advice for getting started with {topic}.",
                f"What should a beginner know about {topic}?",
            ]
        )
    if task == "list":
        return rng.choice(
            [
                f"List five things related to {topic}.",
                f"Give me a list of three tips about {topic}.",
                f"Name four words that come to mind when thinking about {topic}.",
            ]
        )
    if task == "rewrite":
        text = _text(topic, rng)
        return rng.choice(
            [
                f"Rewrite this text with correct spelling: {_typo(text, rng)}",
                f"Make this text more formal: {text}",
                f"Rewrite this text in the past tense: {text}",
                f"Repeat this text exactly: {text}",
            ]
        )
    if task == "summarize":
        return rng.choice(
            [f"Summarize in one sentence: {_text(topic, rng)}", f"Give a short summary: {_text(topic, rng)}"]
        )
    if task == "extract":
        text = _text(topic, rng)
        return rng.choice(
            [
                f"List the names mentioned in this text: {text}",
                f"Which year is mentioned in this text? Text: {text}",
                f"Who designed the posters? Text: {text}",
                f"How many weeks or pages are mentioned? Text: {text}",
            ]
        )
    if task == "code":
        tasks = EVAL_CODE_TASKS if topic in EVAL_TOPICS else CODE_TASKS
        return f"Write a {rng.choice(CODE_LANGUAGES)} function that {rng.choice(tasks)}."
    if task == "chat":
        return rng.choice(
            [
                f"I am bored. Can you tell me something fun about {topic}?",
                f"Do you like {topic}?",
                f"My friend loves {topic}. What gift could I give them?",
                f"Hello! Can we talk about {topic} for a minute?",
                f"Tell me a short story about {topic}.",
            ]
        )
    if task == "multilingual":
        language = rng.choice(LANGUAGES)
        return rng.choice(
            [
                f"Translate to {language}: I would like to learn more about {topic}.",
                f"Say in {language}: {topic} is very interesting.",
                f"Answer in {language}: what is {topic}?",
            ]
        )
    raise ValueError(task)


TASKS = ("question", "explain", "howto", "list", "rewrite", "summarize", "extract", "code", "chat", "multilingual")


def training_prompts(seed: int) -> Iterator[dict]:
    """Endless reproducible stream of {id, task, prompt} over the training topics."""
    rng = random.Random(seed)
    index = 0
    while True:
        task = TASKS[index % len(TASKS)]
        prompt = make_prompt(task, rng.choice(TRAIN_TOPICS), rng)
        yield {"id": f"s{seed}-{index}", "task": task, "prompt": prompt}
        index += 1


def evaluation_prompts(per_task: int = 6) -> list[dict]:
    """The fixed held-out set: evaluation topics only, `per_task` prompts per task type."""
    rng = random.Random(20261129)
    return [
        {"id": f"eval-{task}-{i}", "task": task, "prompt": make_prompt(task, rng.choice(EVAL_TOPICS), rng)}
        for task in TASKS
        for i in range(per_task)
    ]


def prompts_hash(prompts: list[dict]) -> str:
    return hashlib.sha256(json.dumps(prompts, sort_keys=True).encode()).hexdigest()
