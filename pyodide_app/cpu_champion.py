"""The champion without WebGPU: its ONNX export on onnxruntime (wasm in the browser), acceptance on the CPU.

Same Champion interface as GPUChampion: verify([frontier, drafts] at c) scores k+1 rows in one runtime
call, and `champion.decide` applies the processors and the acceptance rule of acceptance.py in Python
(the same Philox draws as the GPU kernel). Its logits come from other arithmetic (MatMulNBits), so
tokens can differ from the WebGPU path only where two logits nearly tie.
"""

from __future__ import annotations

import math
from typing import Generator, Protocol, Sequence

from .acceptance import Decision
from .champion import VerifyRequest, common_prefix, decide, kv_capacity_bytes
from .rng import philox_blocks
from .waits import Steps, Wait, settle

ATTENTION_BUDGET = 64 << 20  # bytes for one call's attention products (float32 graph)
KEY_BLOCK = 256  # the float32 graph pads attention keys to a multiple of this (export_onnx.KEY_BLOCK)


def attention_bytes_per_row_key(entry: dict) -> int:
    """Bytes per (query row, key) of the attention temporaries of the manifest entry's graph, for the float32
    batch-invariant graph (it has external_weights): with "gemv" attention (batched one-row MatMuls) the
    scores, masked scores and weights per head; with the older "products" form, q*k and w*v products of
    head_dim floats per head. Other graphs: 0 (no limit)."""
    if not entry.get("external_weights"):
        return 0
    per_head = 3 if entry.get("attention") == "gemv" else entry["config"]["head_dim"]
    return 4 * entry["config"]["n_heads"] * per_head


def cpu_memory_bytes(manifest: dict, entry_name: str, context_limit: int, rows: int) -> dict[str, int]:
    """What the CPU champion on manifest[entry_name] holds: its weights (float32 copies of the shards'
    tensors for the float32 graph, else the graph file itself: the compact MatMulNBits graph), its KV
    capacity, and the logits rows of its largest call (`rows` rows)."""
    entry = manifest[entry_name]
    weights = manifest["files"][entry["onnx"]]["bytes"]
    tensors = manifest["champion"]["tensors"]
    for name in set((entry.get("external_weights") or {}).values()):
        weights += 4 * math.prod(tensors[name]["shape"])
    config = entry["config"]
    return {
        "weights": weights,
        "kv": kv_capacity_bytes(config, context_limit),
        "scratch": rows * config["vocab_size"] * 4,
    }


class ChampionRuntime(Protocol):
    vocab_size: int
    cached: list[int]  # tokens whose KV rows the runtime holds

    def truncate(self, length: int) -> None: ...

    def run(self, tokens: Sequence[int]) -> Steps[Sequence[list[float]]]:
        """Feed tokens after the cached ones; return one logits row per token, each a list when read
        (RowsOnDemand; the browser's runtime returns them as Steps: see waits.py)."""


class CpuChampion:
    """prefill and verify are generators (Steps, waits.py): the orchestrator drives them."""

    def __init__(self, runtime: ChampionRuntime, context_limit: int, chunk: int = 64, memory: dict | None = None):
        """memory: cpu_memory_bytes() of the runtime's graph (None: a test runtime, nothing counted)."""
        self.runtime = runtime
        self.vocab_size = runtime.vocab_size
        self.context_limit = context_limit
        self.chunk = chunk  # prompt rows per runtime call
        self.calls = 0
        self.wait_seconds = 0.0  # the runtime's calls are timed as verify time: nothing runs behind them
        self.memory = memory or {"weights": 0, "kv": 0, "scratch": 0}

    def forget(self) -> None:
        """Drop the reusable prefix: the next request prefills from position 0 (benchmarks)."""
        self.runtime.truncate(0)

    def cached_rows(self, tokens: Sequence[int]) -> int:
        return common_prefix(self.runtime.cached, tokens)

    def memory_bytes(self) -> dict[str, int]:
        return dict(self.memory)

    def rows_per_call(self, start: int) -> int:
        """Prompt rows for the call that starts at `start`: `chunk`, fewer where the runtime's attention
        holds a [rows, keys] product per head (the batch-invariant float32 graph), so that it stays within
        ATTENTION_BUDGET bytes (keys are padded to KEY_BLOCK)."""
        per_row_key = getattr(self.runtime, "attention_bytes_per_row_key", 0)
        if not per_row_key:
            return self.chunk
        keys = -(-(start + self.chunk) // KEY_BLOCK) * KEY_BLOCK
        return max(1, min(self.chunk, ATTENTION_BUDGET // (keys * per_row_key)))

    def prefill(self, tokens: Sequence[int]) -> Generator[Wait, None, None]:
        tokens = list(tokens)
        keep = common_prefix(self.runtime.cached, tokens)
        self.runtime.truncate(keep)
        start = keep
        while start < len(tokens):
            rows = self.rows_per_call(start)
            yield from settle(self.runtime.run(tokens[start : start + rows]))
            start += rows

    def verify(self, request: VerifyRequest) -> Generator[Wait, None, Decision]:
        c = request.committed_kv
        if common_prefix(self.runtime.cached, request.context[:c]) < c:
            yield from self.prefill(request.context[:c])
        self.runtime.truncate(c)
        rows = yield from settle(self.runtime.run((request.context[-1],) + tuple(request.drafts)))
        self.calls += 1
        return decide(rows, request)

    def score(self, context: Sequence[int], tokens: Sequence[int]) -> Generator[Wait, None, list]:
        """Raw logits rows of `tokens` in one runtime call after `context`'s KV rows."""
        yield from self.prefill(context)
        self.runtime.truncate(len(context))
        return (yield from settle(self.runtime.run(tokens)))

    def verify_logits(self, logits_rows: Sequence[Sequence[float]], request: VerifyRequest) -> Decision:
        """The acceptance rule alone on given rows (the self-test's fixtures)."""
        return decide(logits_rows, request)

    @staticmethod
    def philox_words(cases: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[tuple[int, ...]]:
        """Philox4x32-10 of each (counter, key): this path draws with rng.py."""
        return philox_blocks(cases)
