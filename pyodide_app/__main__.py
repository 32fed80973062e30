"""python -m pyodide_app generate: the native engine from the command line (wgpu-py + onnxruntime).

Text mode streams the answer; --json prints one object
{"samples": [{"tokens": [...], "text": "...", "finish_reason": ...}], "stats": {...}} (docs/ENGINE.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .engine import PROPOSERS
from .errors import SpecChatError
from .manifest import ManifestError


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="python -m pyodide_app")
    commands = main.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="answer one prompt with exact speculative decoding")
    generate.add_argument("--model", type=Path, required=True, help="package folder (python -m build_tools package)")
    generate.add_argument("--prompt", required=True)
    generate.add_argument("--system", help="system message (default: the chat template's own)")
    generate.add_argument(
        "--mode",
        choices=PROPOSERS,
        default="auto",
        help="draft source; auto chooses the source and k each round from measured costs",
    )
    generate.add_argument("--k", type=int, help="draft tokens per round (auto: at most; default 4, auto k-max)")
    generate.add_argument("--k-max", type=int, default=8, help="rows the GPU buffers are sized for, minus one")
    generate.add_argument("--adaptive", action="store_true")
    generate.add_argument("--temperature", type=float, default=0.0)
    generate.add_argument("--top-p", type=float, default=1.0)
    generate.add_argument("--top-k", type=int, default=0)
    generate.add_argument("--repetition-penalty", type=float, default=1.0)
    generate.add_argument(
        "--seed", type=int, help="first seed (default: a fresh random seed per answer, printed with --json)"
    )
    generate.add_argument("--max-tokens", type=int, default=256)
    generate.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    generate.add_argument(
        "--samples", type=int, default=1, help="independent answers (with --seed S: seeds S, S+1, ...)"
    )
    generate.add_argument("--context", type=int, default=2048, help="KV cache rows to allocate")
    generate.add_argument("--json", action="store_true")
    return main


def draft_length(args) -> int:
    """--k, else auto's cap k_max, else 4."""
    if args.k is not None:
        return args.k
    return args.k_max if args.mode == "auto" else 4


def request_for(args, seed: int | None) -> dict:
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": args.prompt}
    ]
    return {
        "messages": messages,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "repetition_penalty": args.repetition_penalty,
        "stop": args.stop,
        **({} if seed is None else {"seed": seed}),
        "speculative": {
            "proposer": args.mode,
            "k": 0 if args.mode == "none" else draft_length(args),
            "adaptive": args.adaptive,
        },
    }


def generate(args) -> None:
    from .native.loader import load_engine

    engine = load_engine(args.model, k_max=args.k_max, context_limit=args.context)
    samples, stats = [], []
    for index in range(args.samples):
        events = engine.chat(request_for(args, None if args.seed is None else args.seed + index))
        for event in events:
            if event["type"] == "delta" and not args.json:
                sys.stdout.write(event["text"])
                sys.stdout.flush()
            elif event["type"] == "done":
                done = event
        if not args.json:
            sys.stdout.write("\n")
            if done["error"]:
                print(f"[error {done['error']['code']}: {done['error']['message']}]", file=sys.stderr)
        samples.append(
            {
                "tokens": done["tokens"],
                "text": done["text"],
                "finish_reason": done["finish_reason"],
                "seed": done["seed"],
            }
        )
        stats.append(done["speculative"])
    if args.json:
        print(json.dumps({"samples": samples, "stats": summarize(stats)}))
    else:
        total = summarize(stats)
        print(
            f"[{total['proposer']}: {total['tokens']} tokens, {total['tokens_per_champion_call']:.2f} tokens/call, "
            f"{total['tokens_per_second']:.2f} tokens/s{auto_choices(stats)}]",
            file=sys.stderr,
        )


def auto_choices(stats: list[dict]) -> str:
    """ ", auto: lookup k=3 on 12 rounds, none on 4" for the last auto answer, else ""."""
    auto = stats[-1].get("auto")
    return f", auto: {auto['chose']}" if auto else ""


def summarize(stats: list[dict]) -> dict:
    """Totals over samples; per-sample stats under "per_sample"."""
    tokens = sum(s["champion_calls"] * s["tokens_per_champion_call"] for s in stats)
    calls = sum(s["champion_calls"] for s in stats)
    seconds = sum(s["time_s"]["total"] for s in stats)
    return {
        "proposer": stats[0]["proposer"],
        "samples": len(stats),
        "tokens": round(tokens),
        "champion_calls": calls,
        "tokens_per_champion_call": tokens / calls if calls else 0.0,
        "tokens_per_second": tokens / seconds if seconds else 0.0,
        "proposed": sum(s["proposed"] for s in stats),
        "accepted": sum(s["accepted"] for s in stats),
        "time_s": {key: sum(s["time_s"][key] for s in stats) for key in ("draft", "verify", "sync", "other", "total")},
        "per_sample": stats,
    }


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        generate(args)
    except (SpecChatError, ManifestError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)  # one line, no traceback
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
