"""ChampionRuntime on onnxruntime (native): the package's champion.onnx (all-row logits) with a KV cache."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .onnx_draft import OnnxDraftRuntime


class OnnxChampionRuntime(OnnxDraftRuntime):
    def run(self, tokens: Sequence[int]) -> list[list[float]]:
        return self.run_array(tokens).astype(np.float64).tolist()

    def run_array(self, tokens: Sequence[int]) -> np.ndarray:
        """Feed tokens after the cached ones; float32 logits [T, V], one row per token."""
        feeds = {
            "input_ids": np.asarray([list(tokens)], np.int64),
            "temperature": np.zeros(1, np.float32),
            "uniform": np.ones(1, np.float32),
            **self.past,
        }
        out = dict(zip(self.outputs, self.session.run(None, feeds)))
        self.past = {
            name.replace("present", "past"): value for name, value in out.items() if name.startswith("present")
        }
        self.cached.extend(tokens)
        return out["all_logits"][0]
