"""The independent evaluation set for neural drafts (draft_eval_independent.json): chats written by hand, not
by the distillation prompt generators, and never trained on (tests/test_draft_eval.py). scripts/draft_eval.py
measures a draft's agreement on it; scripts/native_compare.py and `build_tools bench --workload independent`
time the proposers on it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

INDEPENDENT = Path(__file__).resolve().parent / "draft_eval_independent.json"
OPEN_CHAT = ("casual", "advice", "explanation", "howto", "creative", "multi-turn")  # its open-chat kinds


def independent_items() -> list[dict]:
    """[{id, kind, messages}] in file order."""
    return json.loads(INDEPENDENT.read_text())["items"]


def independent_sha256() -> str:
    return hashlib.sha256(INDEPENDENT.read_bytes()).hexdigest()
