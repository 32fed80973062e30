"""The champion without WebGPU: its ONNX export on onnxruntime (wasm in the browser), acceptance on the CPU.

Same Champion interface as GPUChampion: verify([frontier, drafts] at c) scores k+1 rows in one runtime
call, and `champion.decide` applies the processors and the acceptance rule of acceptance.py in Python
(the same Philox draws as the GPU kernel). Its logits come from other arithmetic (MatMulNBits), so
tokens can differ from the WebGPU path only where two logits nearly tie.
"""

from __future__ import annotations

from typing import Generator, Protocol, Sequence

from .acceptance import Decision
from .champion import VerifyRequest, common_prefix, decide
from .waits import Steps, Wait, settle


class ChampionRuntime(Protocol):
    vocab_size: int
    cached: list[int]  # tokens whose KV rows the runtime holds

    def truncate(self, length: int) -> None: ...

    def run(self, tokens: Sequence[int]) -> Steps[list[list[float]]]:
        """Feed tokens after the cached ones; return one logits row per token (the browser's runtime
        returns them as Steps: see waits.py)."""


class CpuChampion:
    """prefill and verify are generators (Steps, waits.py): the orchestrator drives them."""

    def __init__(self, runtime: ChampionRuntime, context_limit: int, chunk: int = 64):
        self.runtime = runtime
        self.vocab_size = runtime.vocab_size
        self.context_limit = context_limit
        self.chunk = chunk  # prompt rows per runtime call
        self.calls = 0

    def forget(self) -> None:
        """Drop the reusable prefix: the next request prefills from position 0 (benchmarks)."""
        self.runtime.truncate(0)

    def prefill(self, tokens: Sequence[int]) -> Generator[Wait, None, None]:
        tokens = list(tokens)
        keep = common_prefix(self.runtime.cached, tokens)
        self.runtime.truncate(keep)
        for start in range(keep, len(tokens), self.chunk):
            yield from settle(self.runtime.run(tokens[start : start + self.chunk]))

    def verify(self, request: VerifyRequest) -> Generator[Wait, None, Decision]:
        c = request.committed_kv
        if self.runtime.cached[:c] != list(request.context[:c]):
            yield from self.prefill(request.context[:c])
        self.runtime.truncate(c)
        rows = yield from settle(self.runtime.run((request.context[-1],) + tuple(request.drafts)))
        self.calls += 1
        return decide(rows, request)
