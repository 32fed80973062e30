"""DraftRuntime on onnxruntime (native): runs the package's draft.onnx with a KV cache."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import onnxruntime as ort

from ..acceptance import FullRow, ReducedRow


class OnnxDraftRuntime:
    def __init__(self, path: Path | bytes, entry: dict, threads: int = 1, options: ort.SessionOptions | None = None):
        """path: the .onnx file, or the graph's bytes; options: prepared ones (external initializers)."""
        options = options or ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        model = path if isinstance(path, bytes) else str(path)
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        config = entry["config"]
        self.layers, self.kv_heads, self.head_dim = config["n_layers"], config["n_kv_heads"], config["head_dim"]
        self.vocab_size = config["vocab_size"]
        self.id_map = None if entry.get("id_map") is None else np.asarray(entry["id_map"], np.uint32)
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.reset()

    def reset(self) -> None:
        empty = np.zeros((1, self.kv_heads, 0, self.head_dim), np.float32)
        self.past = {f"past_{kind}_{i}": empty for i in range(self.layers) for kind in ("key", "value")}
        self.cached: list[int] = []

    def truncate(self, length: int) -> None:
        if length < len(self.cached):
            self.past = {name: value[:, :, :length] for name, value in self.past.items()}
            self.cached = self.cached[:length]

    def step(self, tokens: Sequence[int], temperature: float, uniform: float):
        feeds = {
            "input_ids": np.asarray([list(tokens)], np.int64),
            "temperature": np.asarray([temperature], np.float32),
            "uniform": np.asarray([uniform], np.float32),
            **self.past,
        }
        out = dict(zip(self.outputs, self.session.run(None, feeds)))
        self.past = {
            name.replace("present", "past"): value for name, value in out.items() if name.startswith("present")
        }
        self.cached.extend(tokens)
        probs = out["probs"][0]
        row = FullRow(probs) if self.id_map is None else ReducedRow(self.id_map, probs)
        return int(out["token"][0]), row
