"""ONNX graphs with their KV cache on web/onnx_session.js (onnxruntime-web), behind the interfaces the
native twins (native/onnx_session.py, onnx_draft.py, onnx_champion.py) implement: one session type, a
thin draft adapter (step) and a thin champion adapter (run). Runs return Steps (waits.py)."""

from __future__ import annotations

from array import array
from typing import Any, Sequence

from ..acceptance import FullRow, ReducedRow, id_positions
from ..champion import CachedPrefix, RowsOnDemand, SessionAdapter
from ..cpu_champion import attention_bytes_per_row_key
from ..processors import SamplingSettings
from ..proposers.neural import DraftStep
from ..sampling import supported_row
from ..waits import wait_for
from .js import ffi, present


class BrowserOnnxSession:
    """The JS OnnxKVSession and the tokens its KV rows hold."""

    def __init__(self, runner: Any, entry: dict):
        self.runner = runner
        self.vocab_size = entry["config"]["vocab_size"]
        self.prefix = CachedPrefix()

    @property
    def cached(self) -> list[int]:
        return self.prefix.tokens

    def reset(self) -> None:
        self.runner.reset()
        self.prefix.clear()

    def truncate(self, length: int) -> None:
        if length < len(self.prefix):
            self.runner.truncate(length)
            self.prefix.truncate(length)

    def feed(self, tokens: Sequence[int], temperature: float = 0.0, uniform: float = 1.0):
        """Steps -> the JS result {token, probs, rows} of running tokens after the cached ones."""
        result = yield from wait_for(self.runner.step(ffi().to_js(list(tokens)), temperature, uniform))
        self.prefix.extend(tokens)
        return result


class BrowserDraftRuntime(SessionAdapter):
    """DraftRuntime (proposers/neural.py) on a BrowserOnnxSession."""

    def __init__(self, runner: Any, entry: dict):
        self.session = BrowserOnnxSession(runner, entry)
        self.vocab_size = self.session.vocab_size
        self.id_map = None if entry.get("id_map") is None else tuple(entry["id_map"])
        self.positions = None if self.id_map is None else id_positions(self.id_map)  # shared by every row

    def step(self, tokens: Sequence[int], temperature: float, uniform: float):
        """Steps -> DraftStep (the graph's token, its q row, the row's entropy)."""
        result = yield from self.session.feed(tokens, temperature, uniform)
        probs = result.probs  # a JS Float32Array: it reaches the GPU without a Python copy
        if self.id_map is None:
            row = FullRow(probs, to_local=float32_array)
        else:
            row = ReducedRow(self.id_map, probs, to_local=float32_array, positions=self.positions)
        return DraftStep(int(result.token), row, float(result.entropyBits))


class BrowserChampionRuntime(SessionAdapter):
    """ChampionRuntime (cpu_champion.py) on a BrowserOnnxSession loaded with the CPU champion: the float32
    graph (manifest "cpu_champion", weights from the shards) or the compact champion.onnx ("fallback")."""

    def __init__(self, runner: Any, entry: dict):
        self.session = BrowserOnnxSession(runner, entry)
        self.vocab_size = self.session.vocab_size
        self.attention_bytes_per_row_key = attention_bytes_per_row_key(entry)

    def run(self, tokens: Sequence[int]):
        """Steps -> one logits row per token, each a list when read."""
        result = yield from self.session.feed(tokens)
        values = float32_array(result.rows)  # the f32 rows [T * V]
        v = self.vocab_size
        best = list(result.best.to_py())  # row_processing.js's rowArgmax: each row's argmax, -1 where not finite

        def processed(j: int, settings: SamplingSettings) -> list | None:
            """Row j processed by row_processing.js's processedRow (sampled, no repetition penalty)."""
            return processed_row(result.processed(j, settings.temperature, settings.top_k, settings.top_p), v)

        return RowsOnDemand(len(tokens), lambda j: values[j * v : (j + 1) * v].tolist(), best, processed)


def processed_row(out: Any, width: int) -> list | None:
    """processedRow's {indices, probs} as process_row returns it: the kept tokens' probabilities in a
    SupportedRow (top-p), or every token's as a list; None where JS left the row to Python."""
    if not present(out):
        return None
    probs = out.probs.to_py().tolist()  # a Float64Array: one copy
    if not present(out.indices):
        return probs
    return supported_row(width, 0.0, dict(zip(out.indices.to_py().tolist(), probs)))


def float32_array(typed_array: Any) -> array:
    """A copy of a JS Float32Array as array('f'): one memory copy, where reading its elements through the
    proxy crosses the FFI each time (in Pyodide under Node: ~0.2 µs an element warm, ~1 µs cold)."""
    values = array("f")
    values.frombytes(typed_array.to_py().cast("B"))
    return values
