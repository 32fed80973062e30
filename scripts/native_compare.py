"""Native end-to-end speed of each proposer against champion-alone, side by side (not a test).

    .venv/bin/python scripts/native_compare.py [--model DIR] [--backend cpu|cpu-compact|webgpu] [--max-tokens N]
                                               [--repeats R] [--arms none,neural:4,hybrid:4,prompt_lookup:4]
                                               [--prompts two|bench|independent] [--per-stratum N] [--strata S,..]
                                               [--kinds K,..] [--sampled]

--prompts bench runs the page bench's workload (build_tools/bench_prompts.json: the first N prompts of every
stratum, or of --strata's only) and adds each arm's median ratio over strata; --prompts independent runs the
drafts' independent evaluation set (build_tools/draft_eval_independent.json, whole chats), only the kinds in
--kinds (default: the open-chat ones); --sampled runs every arm at temperature 0.7, top-p 0.9 (repeat r with
seed r for every arm, so each repeat is another answer; none, prompt lookup and auto propose point masses,
which the verifier tests by the coupled rule, so with one seed they give one answer, which the table checks;
neural and hybrid sample their drafts and give other answers of the same law).

An arm "neural:4:nostop" runs without the draft's calibrated entropy stop (the package's
draft.stop_entropy_bits), to measure what the stop changes in the same run.

One engine per backend is loaded once; for each prompt (an open question and a rewrite) the arms run
interleaved, `--repeats` times, each after forgetting the cached context so every arm pays its own
prefill. Reported per prompt and arm: median end-to-end tokens/s (prefill included; wall clock around
the whole request), median decode tokens/s (after the first round, as the page bench counts: with --sampled
the arms' answers differ in length, which skews end-to-end speed), each as a ratio to `none` measured in the
same run, tokens per champion call, accepted / proposed, and whether the greedy tokens equal champion-alone's
(they must).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools.eval_set import OPEN_CHAT, independent_items  # noqa: E402
from pyodide_app.costs import LONG_CONTEXT  # noqa: E402
from pyodide_app.native.loader import load_engine  # noqa: E402

PROMPTS = {
    "open question": "Why do leaves change color in autumn?",
    "rewrite": "Rewrite this paragraph in the past tense: Every morning, Maria walks to the bakery on the corner. "
    "She buys two croissants and a coffee, and she talks with the baker about the weather. Then she takes "
    "the bus to her office, where she works as an architect.",
}


SAMPLED = {"temperature": 0.7, "top_p": 0.9}
BENCH_PROMPTS = ROOT / "build_tools" / "bench_prompts.json"


def user_turn(prompt: str) -> list[dict]:
    return [{"role": "user", "content": prompt}]


def independent_prompts(kinds: set[str]) -> dict[str, list[dict]]:
    """{"kind: id": messages}: the independent evaluation set's chats of those kinds."""
    return {f"{item['kind']}: {item['id']}": item["messages"] for item in independent_items() if item["kind"] in kinds}


def bench_prompts(per_stratum: int, only: set[str] | None = None) -> dict[str, list[dict]]:
    """{"stratum" or "stratum #i": messages}: the page bench's workload, the first per_stratum of each stratum
    (only: those strata; None: every one)."""
    strata = json.loads(BENCH_PROMPTS.read_text())["strata"]
    unknown = (only or set()) - set(strata)
    if unknown:
        raise SystemExit(f"unknown strata {sorted(unknown)}; the bench has {sorted(strata)}")
    return {
        (name if per_stratum == 1 else f"{name} #{i + 1}"): user_turn(prompt)
        for name, prompts in strata.items()
        if only is None or name in only
        for i, prompt in enumerate(prompts[:per_stratum])
    }


def run_arm(
    engine,
    messages: list[dict],
    proposer: str,
    k: int,
    max_tokens: int,
    stop: bool = True,
    sampled: bool = False,
    seed: int = 0,
) -> dict:
    engine.forget_context()
    calibrated, engine.stop_bits = engine.stop_bits, engine.stop_bits if stop else None
    request = {
        "messages": messages,
        "max_tokens": max_tokens,
        **(SAMPLED if sampled else {"temperature": 0}),
        "seed": seed,
        "speculative": {"proposer": proposer, "k": k, "adaptive": False},
    }
    started = time.perf_counter()
    first_round = None  # (seconds after the start, tokens) of the first delta: prefill and the first round
    for event in engine.chat(request):
        if event["type"] == "delta" and event["tokens"] and first_round is None:
            first_round = (time.perf_counter() - started, len(event["tokens"]))
        if event["type"] == "done":
            done = event
    wall = time.perf_counter() - started
    engine.stop_bits = calibrated
    if done["error"]:
        raise SystemExit(f"{proposer}: {done['error']}")
    stats = done["speculative"]
    auto = stats.get("auto") or {}  # what auto chose, and the live costs it chose from (auto arms only)
    return {
        "tokens": done["tokens"],
        "prompt_tokens": done["usage"]["prompt_tokens"],
        "wall_s": wall,
        "tok_s": len(done["tokens"]) / wall,
        "decode_tok_s": decode_speed(len(done["tokens"]), wall, first_round),
        "per_call": stats["tokens_per_champion_call"],
        "proposed": stats["proposed"],
        "accepted": stats["accepted"],
        "auto": auto.get("chose"),
        "auto_costs": auto.get("costs"),
    }


def decode_speed(tokens: int, wall: float, first_round: tuple[float, int] | None) -> float:
    """Tokens/s after the first round (prefill excluded, as the page bench counts): sampled arms end their
    answers at different lengths, so end-to-end speed would weigh one prefill against unequal token counts."""
    if first_round is None or tokens <= first_round[1] or wall <= first_round[0]:
        return float("nan")
    return (tokens - first_round[1]) / (wall - first_round[0])


# Proposers whose sampled answer is its seed's champion-alone answer (their drafts are point masses).
SEED_INVARIANT = {"none", "prompt_lookup", "auto"}


def same_tokens(rows: list[dict], base: list[dict], sampled: bool, proposer: str) -> bool | str:
    """Whether every run gave none's tokens: greedy, none's only answer; sampled, none's answer of the same
    repeat (seed), for proposers that must reproduce it ("-" for the others)."""
    if not sampled:
        return all(r["tokens"] == base[0]["tokens"] for r in rows)
    if proposer not in SEED_INVARIANT:
        return "-"
    return all(r["tokens"] == b["tokens"] for r, b in zip(rows, base, strict=True))


def parse_arm(text: str) -> tuple[str, int, bool]:
    """ "neural:4" -> ("neural", 4, True); "neural:4:nostop" -> without the draft's entropy stop."""
    parts = text.split(":")
    return parts[0], int(parts[1]) if len(parts) > 1 else 0, not (len(parts) > 2 and parts[2] == "nostop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model", type=Path, default=ROOT / "web" / "model", help="package (default: the default package)"
    )
    parser.add_argument("--backend", choices=("cpu", "cpu-compact", "webgpu"), default="cpu")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arms", default="none,neural:2,neural:4,hybrid:4,prompt_lookup:4,auto:8")
    parser.add_argument("--json", type=Path, help="also write every run here (after each prompt)")
    parser.add_argument("--prompts", choices=("two", "bench", "independent"), default="two")
    parser.add_argument("--per-stratum", type=int, default=1, help="with --prompts bench")
    parser.add_argument("--strata", help="with --prompts bench: only these strata (comma-separated)")
    parser.add_argument("--kinds", default=",".join(OPEN_CHAT), help="with --prompts independent")
    parser.add_argument("--sampled", action="store_true", help="temperature 0.7, top-p 0.9 instead of greedy")
    args = parser.parse_args()
    prompts = {
        "two": lambda: {name: user_turn(prompt) for name, prompt in PROMPTS.items()},
        "bench": lambda: bench_prompts(args.per_stratum, set(args.strata.split(",")) if args.strata else None),
        "independent": lambda: independent_prompts(set(args.kinds.split(","))),
    }[args.prompts]()
    arms = [parse_arm(a) for a in args.arms.split(",")]
    if arms[0] != ("none", 0, True):
        arms.insert(0, ("none", 0, True))
    engine = load_engine(args.model, backend=args.backend, context_limit=2048)
    if any(proposer == "auto" for proposer, _, _ in arms):  # auto measures the device once: outside the timed arms
        for chat in sorted(prompts.values(), key=lambda chat: sum(len(m["content"]) for m in chat), reverse=True):
            # longest first, down to the first short prompt: each long one's key length is measured here too
            if run_arm(engine, chat, "auto", engine.k_max, 1, sampled=args.sampled)["prompt_tokens"] < LONG_CONTEXT:
                break
        measured = {kind: costs.summary() for kind, costs in engine.costs.items()}
        print(f"auto costs: {measured}; long-context key_ms: {engine.key_ms}")
    runs = {}
    for name, prompt in prompts.items():
        for repeat in range(args.repeats):
            for proposer, k, stop in arms:
                run = run_arm(engine, prompt, proposer, k, args.max_tokens, stop, args.sampled, seed=repeat)
                runs.setdefault((name, proposer, k, stop), []).append(run)
        print(f"[{name}] done", file=sys.stderr, flush=True)
        if args.json:  # after every prompt: a run cut off by a time limit keeps what it measured
            write_runs(args.json, runs)
    draft = engine.manifest["draft"]["description"] if engine.manifest.get("draft") else "none"
    setting = "sampled (T 0.7, top-p 0.9)" if args.sampled else "greedy"
    print(
        f"backend {args.backend}; draft: {draft}; {args.max_tokens} {setting} tokens; median of {args.repeats} "
        "interleaved runs"
    )
    print(
        "| prompt | arm | tok/s (end to end) | × none | decode tok/s (after the first round) | × none | tokens/call "
        "| accepted/proposed | tokens == none |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {}
    decode_ratios: dict[str, list[float]] = {}
    for name in prompts:
        base = runs[(name, "none", 0, True)]
        base_speed = statistics.median(r["tok_s"] for r in base)
        base_decode = statistics.median(r["decode_tok_s"] for r in base)
        for proposer, k, stop in arms:
            rows = runs[(name, proposer, k, stop)]
            speed = statistics.median(r["tok_s"] for r in rows)
            decode = statistics.median(r["decode_tok_s"] for r in rows)
            rate = f"{rows[0]['accepted']}/{rows[0]['proposed']}" if rows[0]["proposed"] else "-"
            same = same_tokens(rows, base, args.sampled, proposer)
            label = proposer if proposer == "none" else f"{proposer} k={k}{'' if stop else ' (no stop)'}"
            ratios.setdefault(label, []).append(speed / base_speed)
            decode_ratios.setdefault(label, []).append(decode / base_decode)
            if rows[0]["auto"]:
                label += f" ({rows[0]['auto']})"
            print(
                f"| {name} | {label} | {speed:.2f} | {speed / base_speed:.2f} | {decode:.2f} "
                f"| {decode / base_decode:.2f} | {rows[0]['per_call']:.2f} | {rate} | {same} |"
            )
    if len(prompts) > 2:
        print("\n| arm | median × none over prompts | lowest | highest | decode: median | lowest | highest |")
        print("|---|---|---|---|---|---|---|")
        for label, values in ratios.items():
            decoded = decode_ratios[label]
            print(
                f"| {label} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} "
                f"| {statistics.median(decoded):.2f} | {min(decoded):.2f} | {max(decoded):.2f} |"
            )


def write_runs(path: Path, runs: dict) -> None:
    path.write_text(json.dumps({f"{n}|{p}|{k}|{s}": r for (n, p, k, s), r in runs.items()}))


if __name__ == "__main__":
    main()
