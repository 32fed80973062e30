"""DraftRuntime on onnxruntime (native): the package's draft.onnx through an OnnxKVSession."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import onnxruntime as ort

from ..acceptance import FullRow, ReducedRow, id_positions
from ..champion import SessionAdapter
from ..proposers.neural import DraftStep
from .onnx_session import OnnxKVSession


class OnnxDraftRuntime(SessionAdapter):
    def __init__(self, path: Path | bytes, entry: dict, threads: int = 1, options: ort.SessionOptions | None = None):
        self.session = OnnxKVSession(path, entry, threads, options)
        self.vocab_size = self.session.vocab_size
        self.id_map = None if entry.get("id_map") is None else np.asarray(entry["id_map"], np.uint32)
        self.positions = None if self.id_map is None else id_positions(self.id_map)  # shared by every row

    def step(self, tokens: Sequence[int], temperature: float, uniform: float):
        """Feed tokens after the cached ones -> DraftStep (the graph's token, its q row, the row's entropy)."""
        out = self.session.feed(tokens, temperature, uniform)
        probs = out["probs"][0]
        row = FullRow(probs) if self.id_map is None else ReducedRow(self.id_map, probs, positions=self.positions)
        return DraftStep(int(out["token"][0]), row, float(out["entropy_bits"][0]))
