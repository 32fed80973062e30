"""One ONNX graph with its KV cache on onnxruntime (native): the draft and the CPU champion both run through it.

Every graph of a package (export_onnx) has the same interface: inputs input_ids int64 [1, T], temperature
and uniform f32 [1], past_key_i / past_value_i f32 [1, kv_heads, S, head_dim]; outputs present_key_i /
present_value_i [1, kv_heads, S + T, head_dim] (fed back as the next call's past), plus token, probs and,
for champions, all_logits [1, T, V]. The browser twin is web/onnx_session.js.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import onnxruntime as ort

from ..champion import CachedPrefix


class OnnxKVSession:
    def __init__(self, path: Path | bytes, entry: dict, threads: int = 1, options: ort.SessionOptions | None = None):
        """path: the .onnx file, or the graph's bytes; entry: its manifest entry (config);
        options: prepared ones (e.g. external initializers)."""
        options = options or ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        model = path if isinstance(path, bytes) else str(path)
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        config = entry["config"]
        self.layers, self.kv_heads, self.head_dim = config["n_layers"], config["n_kv_heads"], config["head_dim"]
        self.vocab_size = config["vocab_size"]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.prefix = CachedPrefix()
        self.reset()

    @property
    def cached(self) -> list[int]:
        """The tokens whose KV rows the session holds, in order."""
        return self.prefix.tokens

    def reset(self) -> None:
        empty = np.zeros((1, self.kv_heads, 0, self.head_dim), np.float32)
        self.past = {f"past_{kind}_{i}": empty for i in range(self.layers) for kind in ("key", "value")}
        self.prefix.clear()

    def truncate(self, length: int) -> None:
        """Keep the first `length` KV rows."""
        if length < len(self.prefix):
            self.past = {name: value[:, :, :length] for name, value in self.past.items()}
            self.prefix.truncate(length)

    def feed(self, tokens: Sequence[int], temperature: float = 0.0, uniform: float = 1.0) -> dict[str, np.ndarray]:
        """Run the graph on tokens after the cached ones; their KV rows join the cache. -> outputs by name."""
        feeds = {
            "input_ids": np.asarray([list(tokens)], np.int64),
            "temperature": np.asarray([temperature], np.float32),
            "uniform": np.asarray([uniform], np.float32),
            **self.past,
        }
        out = dict(zip(self.outputs, self.session.run(None, feeds)))
        self.past = {
            f"past{name[len('present') :]}": value for name, value in out.items() if name.startswith("present")
        }
        self.prefix.extend(tokens)
        return out
