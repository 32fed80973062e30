"""Chat completions with exact speculative decoding: the API the CLI and the browser worker use.

    engine.chat({"messages": [...], "max_tokens": 256, "temperature": 0.7, "top_p": 1.0, "top_k": 0,
                 "repetition_penalty": 1.0, "stop": [...], "seed": None (a fresh random seed),
                 "continue_final_message": False (True: the last message is an assistant answer to carry on;
                                                  its optional "tokens", the ids the model wrote, are then
                                                  extended exactly instead of re-tokenising its text),
                 "speculative": {"proposer": "none" | "prompt_lookup" | "neural" | "hybrid" | "auto", "k": 4,
                                 "adaptive": False}})
    -> {"type": "delta", "tokens": [...], "text": "..."} ...  (text never splits a UTF-8 character and
       never shows a possible start of a stop string early)
    -> {"type": "done", "finish_reason": "stop" | "length" | "cancelled" | "error", "text", "tokens",
        "answer_text" (the whole assistant message: a continued one's content and "text" joined),
        "usage": {...}, "seed": the seed used, "speculative": {...}, "receipt": {...},
        "error": {"code", "message"} | None}

Invalid settings raise InvalidSettings before any work is done. Stats keys: docs/ENGINE.md.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, replace
from statistics import median
from typing import Any, Iterator, Sequence

from .champion import kv_capacity_bytes
from .chat_template import ChatTemplate, TemplateError
from .costs import CostModel, LiveCosts, cost_kind, key_length, measure_costs, measure_draft_context, measure_key_ms
from .errors import InvalidSettings, PromptTooLong
from .orchestrator import CancelToken, Emitted, Finished, GenerationConfig, Orchestrator, SpecStats, check_integer
from .processors import SamplingSettings
from .proposers import HybridProposer, NeuralProposer, NoProposer, PromptLookup
from .proposers.auto import AUTO_POLICY_VERSION, NEURAL_PRIOR, AutoProposer, CostPolicy, Learned
from .proposers.neural import AcceptanceByEntropy, DraftRuntime
from .self_test import run_self_test
from .tokenizer import StreamDecoder, Tokenizer
from .waits import Wait

PROPOSERS = ("none", "prompt_lookup", "neural", "hybrid", "auto")  # the one list: CLI, bench and page take it from here
NEEDS_DRAFT = ("neural", "hybrid")  # proposers that cannot run without the package's draft model (auto can)
REQUEST_KEYS = {
    "messages",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "repetition_penalty",
    "stop",
    "seed",
    "speculative",
    "continue_final_message",
}
RECEIPT_VERSION = 1
SEED_BITS = 53  # random default seeds stay exact as JavaScript numbers (explicit seeds may use all 64 bits)
ERROR_MESSAGES = {
    "TARGET_NUMERIC": "the model produced invalid numbers; the answer was stopped",
    "RESIDUAL_MASS": "a numerical safeguard of the sampler tripped; the answer was stopped",
    "DRAFT_NUMERIC": "the draft model produced invalid numbers",
    "VERIFY_RESULT": "the GPU returned an invalid result; the answer was stopped",
    "DEVICE": "the GPU failed (device lost or out of memory); the answer was stopped",
    "DRAFT_RUNTIME": "the draft model failed; the answer was stopped",
    "STALE_PUBLICATION": "internal state conflict; the answer was stopped",
    "INTERNAL": "an internal error stopped the answer",
}


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple
    max_tokens: int
    sampling: SamplingSettings
    stop: tuple[str, ...]
    seed: int
    proposer: str
    k: int
    adaptive: bool
    continue_final: bool = False  # the last message is an assistant answer the model carries on

    @classmethod
    def from_dict(cls, data: dict, k_max: int) -> "ChatRequest":
        unknown = set(data) - REQUEST_KEYS
        if unknown:
            raise InvalidSettings(f"unknown request fields: {sorted(unknown)}")
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidSettings("messages must be a non-empty list")
        spec = data.get("speculative") or {}
        if not isinstance(spec, dict) or set(spec) - {"proposer", "k", "adaptive"}:
            raise InvalidSettings("speculative must be {proposer, k, adaptive}")
        proposer = spec.get("proposer", "none")
        if proposer not in PROPOSERS:
            raise InvalidSettings(f"proposer must be one of {PROPOSERS}, got {proposer!r}")
        k = spec.get("k", {"none": 0, "auto": k_max}.get(proposer, 4))  # auto: k caps its draft length
        stop = data.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(stop)
        if not all(isinstance(s, str) for s in stop):
            raise InvalidSettings("stop must be a string or a list of strings")
        sampling = SamplingSettings(
            temperature=_number(data, "temperature", 0.7),
            top_k=data.get("top_k", 0),
            top_p=_number(data, "top_p", 1.0),
            repetition_penalty=_number(data, "repetition_penalty", 1.0),
        ).validate()
        max_tokens = data.get("max_tokens", 256)
        check_integer("max_tokens", max_tokens, 1)  # the engine's name for GenerationConfig.max_new_tokens
        seed = data.get("seed")
        if seed is None:  # a fresh seed per request; reported in the done event, so the answer can be reproduced
            seed = secrets.randbits(SEED_BITS)
        adaptive = spec.get("adaptive", False)
        if adaptive is True and proposer == "auto":
            raise InvalidSettings("adaptive k does not combine with the auto proposer, which chooses k itself")
        continue_final = data.get("continue_final_message", False)
        if not isinstance(continue_final, bool):
            raise InvalidSettings(f"continue_final_message must be true or false, got {continue_final!r}")
        request = cls(tuple(messages), max_tokens, sampling, stop, seed, proposer, k, adaptive, continue_final)
        request.config(k_max, frozenset())  # k, seed, adaptive and the sampling settings: GenerationConfig.validate
        return replace(request, k=0) if proposer == "none" else request  # a valid k is ignored without drafts

    def config(self, k_max: int, eos_ids: frozenset[int]) -> GenerationConfig:
        """The orchestrator's settings for this request (validated)."""
        return GenerationConfig(
            max_new_tokens=self.max_tokens,
            k=self.k,
            k_max=k_max,
            settings=self.sampling,
            eos_ids=eos_ids,
            stop_strings=self.stop,
            seed=self.seed,
            adaptive=self.adaptive,
        ).validate()


def _number(data: dict, key: str, default: float):
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidSettings(f"{key} must be a number, got {value!r}")
    return value


class TextStream:
    """Token ids -> text deltas: whole UTF-8 characters, special tokens hidden, stop strings held back.
    carried: the tokens of the answer being continued; a character they cut in half is completed by the
    first delta, and `carried_text` is their text up to that character (answer = carried_text + text)."""

    def __init__(self, tokenizer: Tokenizer, stop: Sequence[str], carried: Sequence[int] = ()):
        self.tokenizer = tokenizer
        self.decoder = StreamDecoder(tokenizer)
        self.stop = tuple(s for s in stop if s)
        self.carried_text = self.decoder.feed(self._visible(carried))
        self.text = ""  # everything decoded so far
        self.shown = 0  # characters already emitted

    def _visible(self, tokens: Sequence[int]) -> list[int]:
        return [t for t in tokens if self.tokenizer.tokens[t] not in self.tokenizer.special]

    def feed(self, tokens: Sequence[int]) -> str:
        self.text += self.decoder.feed(self._visible(tokens))
        visible = len(self.text) - self._held_back()
        delta = self.text[self.shown : visible]
        self.shown = max(self.shown, visible)
        return delta

    def finish(self) -> str:
        """The rest of the text, cut at the first stop string (which is not shown)."""
        self.text += self.decoder.flush()
        end = min((i for i in (self.text.find(s) for s in self.stop) if i >= 0), default=len(self.text))
        delta = self.text[self.shown : max(end, self.shown)]
        self.text = self.text[:end]
        self.shown = len(self.text)
        return delta

    def _held_back(self) -> int:
        """Length of the longest tail that could be the start (or all) of a stop string."""
        held = 0
        for stop in self.stop:
            found = self.text.find(stop, max(0, self.shown - len(stop)))
            if found >= 0:
                held = max(held, len(self.text) - found)
                continue
            for size in range(min(len(stop) - 1, len(self.text)), 0, -1):
                if self.text.endswith(stop[:size]):
                    held = max(held, size)
                    break
        return held


def shown_text(tokenizer: Tokenizer, tokens: Sequence[int]) -> str:
    """The text an answer of these tokens shows: TextStream's (special tokens hidden, broken UTF-8 as U+FFFD)."""
    stream = TextStream(tokenizer, ())
    stream.feed(tokens)
    stream.finish()
    return stream.text


class Engine:
    def __init__(
        self,
        champion,
        tokenizer: Tokenizer,
        template: ChatTemplate,
        manifest: dict,
        draft_runtime: DraftRuntime | None = None,
        k_max: int = 8,
        golden: dict | None = None,
    ):
        """golden: the package's golden.json (self_test.py's recorded values), None where it has none."""
        self.champion = champion
        self.tokenizer = tokenizer
        self.template = template
        self.manifest = manifest
        self.draft_runtime = draft_runtime
        self.k_max = k_max
        self.eos_ids = frozenset(manifest["generation"]["eos_ids"])
        self.costs: dict[str, CostModel] = {}  # cost_kind -> measured at its first `auto` request
        self.live: dict[str, LiveCosts] = {}  # cost_kind -> those costs, refined by every auto round of it since
        self.refine_costs = True  # False: requests keep the measurement (tests that fix the costs)
        # key length -> costs.measure_key_ms there, at the first auto request whose prompt has that key length
        self.key_ms: dict[int, tuple[float, ...]] = {}
        # key length -> (draft_key_ms, draft_feed_ms) there (costs.measure_draft_context), measured beside key_ms
        self.draft_context: dict[int, tuple[float, float]] = {}
        # The last auto answer's prompt, cost kind and what its policy learned: an auto answer of that kind
        # whose prompt extends that prompt (the same conversation, a later turn) starts from those counts.
        self.learned: tuple[tuple[int, ...], str, Learned] | None = None
        self.golden = golden
        # The draft's calibrated stop (package field): a proposal ends before a row more uncertain than this.
        draft = manifest.get("draft") or {}
        self.stop_bits = draft.get("stop_entropy_bits")
        # Its measured acceptance by row entropy (package field), with which auto's neural rounds draft past k.
        self.draft_calibration = AcceptanceByEntropy.from_manifest(draft.get("acceptance_by_entropy"))

    def memory_report(self) -> dict:
        """Bytes by category: champion weights, its KV cache (capacity), scratch (activations, logits,
        verify buffers), and the draft (weights + KV capacity). Host-side ONNX runtimes' own working
        memory is not visible from here and not counted."""
        report = {**self.champion.memory_bytes(), "draft": 0}
        if self.draft_runtime is not None:
            draft = self.manifest["draft"]
            files = self.manifest["files"]
            report["draft"] = files[draft["onnx"]]["bytes"] + kv_capacity_bytes(
                draft["config"], self.champion.context_limit
            )
        return report

    def forget_context(self, keep_kv: bool = False) -> None:
        """Forget what earlier answers leave for the next request: auto's learned counts and, unless keep_kv,
        the cached prefixes (champion KV, draft KV), so the next request pays its whole prefill as a fresh
        conversation does. Benchmarks call it between arms; keep_kv lets a repeated prompt skip its prefill
        (its decode then starts from the same cached rows, bitwise, by batch invariance). Answers are unaffected."""
        self.learned = None
        if keep_kv:
            return
        self.champion.forget()
        if self.draft_runtime is not None:
            self.draft_runtime.reset()

    def self_test(self) -> Iterator[Wait]:
        """Steps -> the exactness self-test's report on this champion (self_test.run_self_test); cached
        prefixes are forgotten afterwards."""
        report = yield from run_self_test(self.champion, self.golden, self.k_max + 1)
        self.forget_context()
        return report

    def encode_prompt(self, messages: Sequence[dict], continue_final: bool = False) -> list[int]:
        """Token ids of the rendered conversation (continue_final: see ChatTemplate.render). A continued
        answer that carries its `tokens` (the ids the model wrote) goes on from exactly those ids: its text
        need not tokenise back to them (a character cut in half decodes to U+FFFD, which encodes otherwise)."""
        try:
            text = self.template.render(messages, continue_final=continue_final)
            if continue_final and "tokens" in messages[-1]:
                opened = [*messages[:-1], {"role": "assistant", "content": ""}]
                head = self.tokenizer.encode(self.template.render(opened, continue_final=True))
                return head + self.carried_tokens(messages[-1])
        except TemplateError as error:
            raise InvalidSettings(str(error)) from None
        return self.tokenizer.encode(text)

    def carried_tokens(self, message: dict) -> list[int]:
        """The continued message's `tokens`, checked: valid ids that spell its content as answers show it."""
        tokens = message["tokens"]
        vocab = self.tokenizer.vocab_size
        if not isinstance(tokens, list) or not all(type(t) is int and 0 <= t < vocab for t in tokens):
            raise InvalidSettings(f"the continued message's tokens must be a list of token ids in [0, {vocab})")
        if shown_text(self.tokenizer, tokens) != message["content"]:
            raise InvalidSettings(
                "the continued message's tokens do not spell its content: send the tokens the model wrote for "
                "that answer, or leave them out to continue from the text"
            )
        return list(tokens)

    def fit_conversation(self, messages: Sequence[dict], room: int) -> dict:
        """How much of a chat fits the context with `room` tokens left for the answer: drops the oldest
        turns (a user message with the answer after it; never the system message, never the last message)
        until the prompt fits. -> {"dropped": messages left out after the system message, "prompt_tokens": of
        what is kept, "fits": whether that fits, "limit": the context limit in tokens}."""
        limit = self.champion.context_limit
        head = 1 if messages and messages[0].get("role") == "system" else 0
        last = len(messages) - 1
        start = head  # the first message kept after the system message
        while True:
            count = len(self.encode_prompt([*messages[:head], *messages[start:]]))
            fits = count + room <= limit
            if fits or start >= last:
                return {"dropped": start - head, "prompt_tokens": count, "fits": fits, "limit": limit}
            turn = messages[start].get("role") == "user" and start + 1 < last
            start += 2 if turn and messages[start + 1].get("role") == "assistant" else 1

    def _proposer(self, request: ChatRequest, prompt: Sequence[int]):
        if request.proposer == "prompt_lookup":
            return PromptLookup()
        if request.proposer == "auto":
            # Its draft proposes its argmax, a point mass, at every temperature: a point mass is tested by the
            # coupled rule, so auto's choices never change a token (acceptance.py), only the answer's speed.
            neural = None if self.draft_runtime is None else NeuralProposer(self.draft_runtime, 0.0, self.stop_bits)
            first, later = self.neural_priors()
            end = min(len(prompt) + request.max_tokens, self.champion.context_limit)  # a catch-up is spread to here
            policy = CostPolicy(
                None,
                first,
                self._earlier(request, prompt),
                neural_later=later,
                answer_end=end,
                calibration=self.draft_calibration,
            )
            return AutoProposer(policy, neural)
        if request.proposer in NEEDS_DRAFT:
            if self.draft_runtime is None:
                raise InvalidSettings(
                    f"this package has no draft model: the {request.proposer} proposer is unavailable"
                )
            neural = NeuralProposer(self.draft_runtime, request.sampling.temperature, self.stop_bits)
            return neural if request.proposer == "neural" else HybridProposer(neural)
        return NoProposer()

    def _earlier(self, request: ChatRequest, prompt: Sequence[int]) -> Learned | None:
        """The conversation's earlier counts for a request that continues the last auto answer's prompt with the
        same kind of sampling (a draft's acceptance is p(token) when sampling, 0 or 1 when greedy)."""
        if self.learned is None:
            return None
        earlier_prompt, kind, learned = self.learned
        same_kind = kind == cost_kind(request.sampling)
        return learned if same_kind and tuple(prompt[: len(earlier_prompt)]) == earlier_prompt else None

    def neural_priors(self) -> tuple[float, float | None]:
        """The draft's measured greedy agreement with the champion (its package; else a default), and its
        agreement right after an agreeing position (None where the package does not say: the first again)."""
        draft = self.manifest.get("draft") or {}

        def rate(key: str) -> float | None:
            value = draft.get(key)
            return float(value) if isinstance(value, (int, float)) and 0 < value < 1 else None

        return rate("agreement") or NEURAL_PRIOR, rate("later_agreement")

    def _costs_then(self, proposer: AutoProposer, settings: SamplingSettings, prompt_tokens: int, events):
        """Measure the device's costs once per kind of sampling (at its first auto request), and the cost of
        a long context once per key length (at the first auto request whose prompt has it), then stream the
        request's events."""
        kind = cost_kind(settings)
        if kind not in self.costs:
            draft = proposer.neural  # the request's neural proposer (its temperature and stop), or None
            self.costs[kind] = yield from measure_costs(self.champion, draft, self.k_max + 1, settings)
        # Only a long prompt's request prices context, at its own key length (a short one's choices never depend
        # on whether a long one came first, nor a long one's on another length's).
        length = key_length(prompt_tokens, self.champion.context_limit, self.k_max + 1)
        if length is not None and length not in self.key_ms:
            self.key_ms[length] = yield from measure_key_ms(self.champion, self.k_max + 1, length)
            if proposer.neural is not None:  # the draft's step and catch-up there
                step_ms = self.costs[kind].draft_step_ms
                self.draft_context[length] = yield from measure_draft_context(proposer.neural, length, step_ms)
        context = {"key_ms": self.key_ms.get(length, ()), "key_length": length or 0}
        if length in self.draft_context:
            context["draft_key_ms"], context["draft_feed_ms"] = self.draft_context[length]
        if self.refine_costs:  # its tokens do not depend on what auto chooses (acceptance.py): learn live
            live = self.live.setdefault(kind, LiveCosts(self.costs[kind]))
            proposer.policy.live = live
            proposer.policy.costs = live.model(**context)
        else:
            proposer.policy.costs = replace(self.costs[kind], **context)
        yield from events

    def chat(self, data: dict, cancel: CancelToken | None = None) -> Iterator[dict | Wait]:
        """Validate (raising InvalidSettings before any work), then stream events (dicts). Asynchronous
        runtimes (the browser's) also put their Waits in the stream for the driver to settle."""
        request = ChatRequest.from_dict(data, self.k_max)
        prompt = self.encode_prompt(request.messages, request.continue_final)
        limit = self.champion.context_limit
        if len(prompt) >= limit:
            raise PromptTooLong(
                f"the prompt is {len(prompt)} tokens; the context limit is {limit} (room for at least one more is "
                "needed)"
            )
        config = request.config(self.k_max, self.eos_ids)
        proposer = self._proposer(request, prompt)
        orchestrator = Orchestrator(self.champion, proposer, config, self.tokenizer.token_bytes)
        events = orchestrator.generate(prompt, cancel)
        if isinstance(proposer, AutoProposer):
            events = self._costs_then(proposer, request.sampling, len(prompt), events)
        return self._stream(request, prompt, events, proposer)

    def _stream(self, request: ChatRequest, prompt: list[int], events, proposer) -> Iterator[dict | Wait]:
        final = request.messages[-1] if request.continue_final else {"content": ""}  # the answer written on
        text = TextStream(self.tokenizer, request.stop, final.get("tokens", ()))  # tokens checked by encode_prompt
        start = text.carried_text if "tokens" in final else final["content"]
        tokens: list[int] = []
        for event in events:
            if isinstance(event, Wait):
                yield event  # for the async driver (waits.py); never seen natively
            elif isinstance(event, Emitted):
                tokens.extend(event.tokens)
                delta = text.feed(event.tokens)
                yield {"type": "delta", "tokens": list(event.tokens), "text": delta}
            elif isinstance(event, Finished):
                if isinstance(proposer, AutoProposer):
                    self.learned = (tuple(prompt), cost_kind(request.sampling), proposer.policy.learned())
                tail = text.finish()
                if tail:
                    yield {"type": "delta", "tokens": [], "text": tail}
                yield self._done(request, prompt, tokens, (start, text.text), event, proposer)

    def _done(
        self, request: ChatRequest, prompt: list[int], tokens: list[int], text: tuple[str, str], end: Finished, proposer
    ) -> dict:
        """text: (the start of the answer this request wrote on, what it wrote)."""
        start, written = text
        stats = end.stats
        error = None
        if end.reason == "error":
            code = stats.error_code or "INTERNAL"
            error = {"code": code, "message": ERROR_MESSAGES.get(code, ERROR_MESSAGES["INTERNAL"])}
        return {
            "type": "done",
            "finish_reason": end.reason,
            "text": written,
            "answer_text": start + written,  # the whole assistant message as it now reads
            "tokens": tokens,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(tokens),
                "total_tokens": len(prompt) + len(tokens),
                "cached_prompt_tokens": stats.cached_prompt_tokens,
            },
            "seed": request.seed,
            "speculative": {**speculative_stats(stats, request), **self._auto_stats(proposer, request.sampling)},
            "receipt": self.receipt(request, prompt, tokens, end),
            "error": error,
        }

    def _auto_stats(self, proposer, settings: SamplingSettings) -> dict:
        if not isinstance(proposer, AutoProposer):
            return {}
        policy = proposer.policy
        earlier, measured = policy.earlier, self.costs.get(cost_kind(settings))
        return {
            "auto": {
                "policy_version": AUTO_POLICY_VERSION,
                "chose": proposer.summary(),
                "rounds": dict(proposer.rounds),
                "confident_drafts": proposer.extended,  # drafts neural rounds kept past their k
                "draft_failed": proposer.neural_failed,
                "earlier_rounds": earlier.rounds if earlier else 0,  # rounds of earlier answers it learned from
                "costs": policy.costs.summary() if policy.costs else None,  # what its last round was chosen by
                "measured_costs": measured.summary() if measured else None,  # the engine's measurement of its kind
                "live_rounds": policy.live.rounds() if policy.live else 0,  # recent rounds refining them
            }
        }

    def receipt(self, request: ChatRequest, prompt: list[int], tokens: list[int], end: Finished) -> dict:
        """Privacy-safe record of one answer: hashes, counts, histograms, timings; no text, no token ids."""
        identity = self.manifest["identity"]
        stats = end.stats
        policy = {
            "temperature": float(request.sampling.temperature),
            "top_p": float(request.sampling.top_p),
            "top_k": request.sampling.top_k,
            "repetition_penalty": float(request.sampling.repetition_penalty),
            "stop_count": len(request.stop),
            "max_tokens": request.max_tokens,
        }
        return {
            "receipt_version": RECEIPT_VERSION,
            "request_nonce": secrets.token_hex(8),
            "champion_weights": identity["champion_weights"],
            "draft_weights": identity.get("draft_weights")
            if request.proposer in ("neural", "hybrid", "auto")
            else "none",
            "tokenizer": identity["tokenizer"],
            "chat_template": identity["chat_template"],
            "sampling_policy": _digest(policy),
            "scheduler_policy": _digest(
                {
                    "proposer": request.proposer,
                    "k": request.k,
                    "adaptive": request.adaptive,
                    **({"auto_policy": AUTO_POLICY_VERSION} if request.proposer == "auto" else {}),
                }
            ),
            "seed_commitment": _digest({"seed": request.seed}),
            "counts": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(tokens),
                "champion_calls": stats.champion_calls,
                "rounds": stats.rounds,
                "proposed": stats.proposed,
                "accepted": stats.accepted,
            },
            "accepted_histogram": {str(a): n for a, n in sorted(stats.accepted_histogram.items())},
            "reached_by_position": list(stats.reached),
            "accepted_by_position": list(stats.accepted_at),
            "timings_s": {
                "draft": round(stats.draft_seconds, 6),
                "verify": round(stats.verify_seconds, 6),
                "total": round(stats.total_seconds, 6),
            },
            "finish_reason": end.reason,
            "failure_code": stats.error_code,
            "fallback_code": stats.fallback_code,
        }


def speculative_stats(stats: SpecStats, request: ChatRequest) -> dict:
    other = max(0.0, stats.total_seconds - stats.draft_seconds - stats.verify_seconds)
    host_verify = stats.verify_seconds - stats.sync_seconds  # encode + submit (+ CPU champion work)
    reached = stats.reached
    return {
        "proposer": request.proposer,
        "k": request.k,
        "adaptive": request.adaptive,
        "rounds": stats.rounds,
        "champion_calls": stats.champion_calls,
        "proposed": stats.proposed,
        "accepted": stats.accepted,
        "acceptance_rate": stats.accepted / stats.proposed if stats.proposed else None,
        "acceptance_by_position": [a / r if r else None for a, r in zip(stats.accepted_at, reached)],
        "survival": stats.survival(),
        "tokens_per_champion_call": stats.tokens_per_call,
        "draft_failures": stats.draft_failures,
        "verify_ms_by_rows": {str(rows): timing_summary(ms) for rows, ms in sorted(stats.verify_ms_by_rows.items())},
        "verify_ms_by_read": {
            f"{rows}:{read}": timing_summary(ms) for (rows, read), ms in sorted(stats.verify_ms_by_read.items())
        },
        "time_s": {
            "draft": stats.draft_seconds,
            "verify": host_verify,
            "sync": stats.sync_seconds,
            "other": other,
            "total": stats.total_seconds,
        },
        "tokens_per_second": stats.emitted / stats.total_seconds if stats.total_seconds else None,
        "fallback_code": stats.fallback_code,
        "error_code": stats.error_code,
    }


def timing_summary(ms: list[float]) -> dict:
    return {"rounds": len(ms), "median": round(median(ms), 3), "min": round(min(ms), 3)}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
