"""ChampionRuntime on onnxruntime (native): a champion graph (all-row logits) through an OnnxKVSession."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import onnxruntime as ort

from ..champion import RowsOnDemand, SessionAdapter
from ..cpu_champion import attention_bytes_per_row_key
from .onnx_session import OnnxKVSession


class OnnxChampionRuntime(SessionAdapter):
    def __init__(self, path: Path | bytes, entry: dict, threads: int = 1, options: ort.SessionOptions | None = None):
        self.session = OnnxKVSession(path, entry, threads, options)
        self.vocab_size = self.session.vocab_size
        self.attention_bytes_per_row_key = attention_bytes_per_row_key(entry)

    def run(self, tokens: Sequence[int]) -> RowsOnDemand:
        """One logits row per token, each a list of floats when read."""
        rows = self.run_array(tokens)
        best = np.where(np.isfinite(rows).all(axis=1), rows.argmax(axis=1), -1)  # argmax: the first of ties
        return RowsOnDemand(len(rows), lambda j: rows[j].astype(np.float64).tolist(), best.tolist())

    def run_array(self, tokens: Sequence[int]) -> np.ndarray:
        """Feed tokens after the cached ones; float32 logits [T, V], one row per token."""
        return self.session.feed(tokens)["all_logits"][0]
