"""`python -m build_tools bench`: every arm side by side in one headless browser session.

The real page is served on 127.0.0.1 and driven through its automation hooks (window.specChat in
web/app.js). Per prompt the arms run interleaved (A B C ... A B C ...), so machine drift hits every
arm alike. Arms: champion alone; prompt lookup k = 2, 4, 8, adaptive; neural k = 2, 4, adaptive;
and the peers users would otherwise pick: the same champion ONNX greedily decoded by
onnxruntime-web alone (wasm and WebGPU execution providers). Writes bench.json, table.md and plots.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pyodide_app.costs import LONG_CONTEXT

from .bench_stats import SLOW_PEER, auto_bars, identical_answers, summarize, table
from .eval_set import independent_items, independent_sha256

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = Path(__file__).resolve().parent / "bench_prompts.json"
SETTINGS = {"greedy": {"temperature": 0.0, "top_p": 1.0}, "sampled": {"temperature": 0.7, "top_p": 0.9}}
SEED = 20261129
# Arms of the sampled setting (the peers decode greedily only; fewer arms keep the run under 30 min).
SAMPLED_ARMS = ("none", "lookup-k4", "lookup-adaptive", "neural-k4", "neural-adaptive", "hybrid-k4", "auto")
SLOW_PEER_TOKENS = 6  # the one run of SLOW_PEER (bench_stats) decodes this many tokens
CALL_TIMEOUT_S = 900  # one arm's answer to one prompt; past it the arm counts as hung


@dataclass(frozen=True)
class Arm:
    name: str
    proposer: str = "none"  # one of the engine's PROPOSERS; "peer" for a peer alone
    k: int = 0
    adaptive: bool = False
    peer: str | None = None  # "wasm" | "webgpu" (onnxruntime-web) | "wllama" (llama.cpp's wasm build)
    threads: int = 1  # wllama's threads


ARMS = (
    Arm("none"),
    Arm("lookup-k2", "prompt_lookup", 2),
    Arm("lookup-k4", "prompt_lookup", 4),
    Arm("lookup-k8", "prompt_lookup", 8),
    Arm("lookup-adaptive", "prompt_lookup", 4, True),
    Arm("neural-k2", "neural", 2),
    Arm("neural-k4", "neural", 4),
    Arm("neural-adaptive", "neural", 4, True),
    Arm("hybrid-k4", "hybrid", 4),
    Arm("auto", "auto", 8),
    Arm("ort-wasm", "peer", peer="wasm"),
    Arm("ort-webgpu", "peer", peer="webgpu"),
    Arm("wllama-1t", "peer", peer="wllama", threads=1),
    Arm("wllama-2t", "peer", peer="wllama", threads=2),
)


# -- the workload ---------------------------------------------------------------------------------

QUICK_STRATA = ("rewrite", "extraction", "code", "chat", "json", "adversarial")  # --quick: no long prompts


WORKLOADS = ("bench", "independent")  # --workload: bench_prompts.json, or the drafts' independent set (eval_set)


def workload_sha256(name: str = "bench") -> str:
    """The frozen workload's identity, recorded in every bench output."""
    return independent_sha256() if name == "independent" else hashlib.sha256(PROMPTS.read_bytes()).hexdigest()


def workload_chats(name: str = "bench") -> dict[str, list[tuple[str, list[dict]]]]:
    """stratum -> [(the prompt's name in records, its chat messages)]: the bench's strata (name: the prompt's
    text, one user turn) or the independent set's kinds (name: the chat's id, whole multi-turn chats)."""
    if name == "independent":
        chats: dict[str, list[tuple[str, list[dict]]]] = {}
        for item in independent_items():
            chats.setdefault(item["kind"], []).append((item["id"], item["messages"]))
        return chats
    strata = json.loads(PROMPTS.read_text())["strata"]
    return {stratum: [(p, [{"role": "user", "content": p}]) for p in prompts] for stratum, prompts in strata.items()}


def workload(strata: list[str] | None, per_stratum: int, sampled_per_stratum: int, name: str = "bench") -> list[dict]:
    """[{setting, stratum, prompt, messages}] in run order."""
    data = workload_chats(name)
    chosen = strata or list(data)
    unknown = [s for s in chosen if s not in data]
    if unknown:
        raise SystemExit(f"bench: unknown strata {unknown}; known: {sorted(data)}")
    items = []
    for setting, count in (("greedy", per_stratum), ("sampled", sampled_per_stratum)):
        for stratum in chosen:
            items += [
                {"setting": setting, "stratum": stratum, "prompt": p, "messages": m} for p, m in data[stratum][:count]
            ]
    return items


def warm_auto(page, messages: list[dict], setting: str, call_timeout_s: float) -> dict:
    """One auto answer of one token, outside the timed arms: auto measures its costs at its first request of a
    kind of sampling and of a long prompt's key length. -> its done event ({} when none came)."""
    request = page_request(Arm("auto", "auto", 8), messages, setting, 1)
    return call(page, "(req) => window.specChat.chat(req)", request, call_timeout_s)["done"] or {}


def page_request(arm: Arm, messages: list[dict], setting: str, max_tokens: int, seed: int = SEED) -> dict:
    return {
        "messages": messages,
        "max_tokens": max_tokens,
        **SETTINGS[setting],
        "top_k": 0,
        "repetition_penalty": 1,
        "seed": seed,
        "speculative": {"proposer": arm.proposer, "k": arm.k, "adaptive": arm.adaptive},
    }


# -- driving the page -------------------------------------------------------------------------------


class Hung(RuntimeError):
    """A page call gave no answer within its time limit."""


def call(page, function: str, arg=None, timeout_s: float = CALL_TIMEOUT_S):
    """page.evaluate(function, arg), raising Hung after timeout_s (Playwright's evaluate waits forever)."""
    script = (
        "async ([arg, ms]) => { let timer; const limit = new Promise((_, reject) => { timer = setTimeout("
        "() => reject(new Error(`HUNG: no answer in ${ms / 1000} s`)), ms); });"
        f" try {{ return await Promise.race([({function})(arg), limit]); }} finally {{ clearTimeout(timer); }} }}"
    )
    try:
        return page.evaluate(script, [arg, timeout_s * 1000])
    except Exception as error:
        if "HUNG: " in str(error):
            raise Hung(f"{function[:80]}: no answer in {timeout_s:g} s") from None
        raise


def open_page(context, url: str, timeout_s: float = 900):
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#loading", state="hidden", timeout=timeout_s * 1000)
    if page.is_visible("#fatal"):
        raise SystemExit(f"bench: the page failed to load: {page.text_content('#fatal-message')}")
    return page, page.evaluate("window.specChat.info()")


def outcome(record: dict) -> str:
    """One arm's result on one prompt, for the log."""
    if "error" in record:
        return f"error {record['error']}"
    tokens = record.get("n_tokens", len(record.get("tokens", [])))
    first = (
        f"first token {record['first_token_s']:.2f} s ({record['cached_prompt_tokens']} prompt tokens cached)"
        if record.get("kv_kept")
        else f"TTFT {record['ttft_s'] or 0:.2f} s"
    )
    return f"{tokens} tokens, decode {record['decode_tps'] or 0:.2f} tok/s, {first}"


def open_peer_page(context, url: str):
    """The llama.cpp peer's page (bench/wllama.html) in a new tab of the bench's browser session."""
    peer_page = context.new_page()
    peer_page.goto(url.split("?")[0] + "bench/wllama.html")
    peer_page.wait_for_function("() => window.wllamaReady === true", timeout=60_000)
    return peer_page


def runs_on(arm: Arm, item: dict, first_greedy: dict) -> bool:
    if item["setting"] != "greedy":
        return arm.name in SAMPLED_ARMS
    return arm.name != SLOW_PEER or item is first_greedy


def run_arm(
    page,
    arm: Arm,
    item: dict,
    max_tokens: int,
    peer_page=None,
    render=None,
    timeout_s: float = CALL_TIMEOUT_S,
    keep_kv: bool = False,
    seed: int = SEED,
) -> dict:
    """peer_page: the wllama page (bench/wllama.html) or None; render(messages) -> the chat-templated prompt.
    keep_kv: the app's arm starts from the KV rows the page holds (the same prompt's, from the arm before it)
    instead of its own prefill; its decode is timed as usual, its time to first token is not a TTFT (kept apart
    as first_token_s, out of the TTFT medians).
    A peer that hangs yields a record with an error (Hung for the caller to see); the app's own page raises Hung."""
    if arm.name == SLOW_PEER:
        max_tokens = min(max_tokens, SLOW_PEER_TOKENS)
    request = page_request(arm, item["messages"], item["setting"], max_tokens, seed)
    record = {"arm": arm.name, **item, "seed": seed}
    if arm.peer == "wllama":
        if peer_page is None:
            return {**record, "error": "no GGUF file for this package: the llama.cpp peer cannot run"}
        try:
            out = call(
                peer_page,
                "([p, n, t]) => window.wllamaPeer.run(p, n, t)",
                [render(request["messages"]), max_tokens, arm.threads],
                timeout_s,
            )
        except Hung as error:
            return {**record, "error": str(error), "hung": True}
        except Exception as error:
            return {**record, "error": str(error).splitlines()[0][:300]}
        n = out["tokens"]
        decode_s = out["total_s"] - out["ttft_s"]
        return {
            **record,
            "text": out["text"],
            "n_tokens": n,
            "ttft_s": out["ttft_s"],
            "wall_s": out["total_s"],
            "decode_tps": (n - 1) / decode_s if n > 1 and decode_s > 0 else None,
            "load_extra_s": out["load_s"],
            "tokens_per_call": 1.0,
            "llama_timings": out["timings"],
            "isolated": out["isolated"],
        }
    if arm.peer:
        try:
            out = call(page, "([backend, req]) => window.specChat.peer(backend, req)", [arm.peer, request], timeout_s)
        except Hung as error:
            return {**record, "error": str(error), "hung": True}
        except Exception as error:
            return {**record, "error": str(error).splitlines()[0][:300]}
        n = len(out["tokens"])
        return {
            **record,
            "tokens": out["tokens"],
            "ttft_s": out["ttft_s"],
            "wall_s": out["total_s"],
            "decode_tps": (n - 1) / out["decode_s"] if n > 1 and out["decode_s"] > 0 else None,
            "load_extra_s": out["session_s"],
            "tokens_per_call": 1.0,
        }
    # Every arm starts without auto's learned counts and (unless keep_kv) pays its own prefill (TTFT is comparable).
    call(page, "(keep) => window.specChat.forget(keep)", keep_kv, timeout_s)
    out = call(page, "(req) => window.specChat.chat(req)", request, timeout_s)
    done = out["done"]
    if done is None or done.get("type") != "done":
        return {**record, "error": json.dumps(done)[:300]}
    spec, receipt = done["speculative"], done["receipt"]
    n = len(done["tokens"])
    decode_s = out["wall_s"] - (out["ttft_s"] or 0)
    first = out["first_tokens"] or 1  # tokens of the first round: their time is TTFT, not decode
    return {
        **record,
        "tokens": done["tokens"],
        "seed": done["seed"],  # the seed the engine used
        "finish": done["finish_reason"],
        **({"kv_kept": True, "ttft_s": None, "first_token_s": out["ttft_s"]} if keep_kv else {"ttft_s": out["ttft_s"]}),
        "wall_s": out["wall_s"],
        "decode_tps": (n - first) / decode_s if n > first and decode_s > 0 else None,
        "cached_prompt_tokens": done["usage"]["cached_prompt_tokens"],
        "tokens_per_call": spec["tokens_per_champion_call"],
        "time_s": spec["time_s"],
        "reached": receipt["reached_by_position"],
        "accepted_at": receipt["accepted_by_position"],
        "proposed": spec["proposed"],
        "accepted": spec["accepted"],
        "fallback": spec["fallback_code"],
        "verify_ms_by_rows": spec["verify_ms_by_rows"],
        "verify_ms_by_read": spec["verify_ms_by_read"],
        **({"auto_chose": spec["auto"]["chose"], "auto_costs": spec["auto"]["costs"]} if spec.get("auto") else {}),
    }


# -- the command ----------------------------------------------------------------------------------


def peer_gguf(manifest: dict, site: Path) -> Path | None:
    """The GGUF the llama.cpp peer runs: the default champion's file for the default package, a GGUF written
    from the synthetic source for a synthetic package, else None (the wllama arms then record an error)."""
    from .gguf_source import DEFAULT_MODEL_FILE, default_champion_path

    source = str(manifest.get("source", ""))
    if source == DEFAULT_MODEL_FILE:
        return default_champion_path()
    if source.startswith("synth:"):
        from .gguf_writer import write_gguf
        from .synth import synth_models

        return write_gguf(synth_models(int(source.split(":")[1]))[0], site / "synth.gguf")
    return None


def prompt_renderer(model: Path, manifest: dict):
    """messages -> the chat-templated prompt string (what the app tokenizes), for the llama.cpp peer."""
    from pyodide_app.chat_template import ChatTemplate

    template = ChatTemplate.from_jinja((Path(model) / manifest["chat_template"]).read_text())
    return template.render


def token_decoder(model: Path, manifest: dict):
    from pyodide_app.tokenizer import Tokenizer

    return Tokenizer.from_json((Path(model) / manifest["tokenizer"]).read_text()).decode


def launch(playwright, browser: str):
    if browser == "chromium":
        return playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader", "--disable-quic"],
        )
    return playwright.firefox.launch(
        channel="moz-firefox",
        executable_path="/usr/bin/firefox-esr",
        firefox_user_prefs={"dom.webgpu.enabled": True, "gfx.webgpu.ignore-blocklist": True},
    )


def run_bench(
    model: Path,
    out: Path,
    browser: str = "firefox",
    max_tokens: int = 16,
    per_stratum: int = 1,
    sampled_per_stratum: int = 1,
    strata: list[str] | None = None,
    arm_names: list[str] | None = None,
    kernel_repeats: int = 3,
    log=print,
    backend: str = "auto",
    peer_gguf_path: Path | None = None,
    call_timeout_s: float = CALL_TIMEOUT_S,
    repeats: int = 1,
    workload_name: str = "bench",
    keep_prompt_kv: bool = False,
) -> dict:
    """workload_name: the prompts (WORKLOADS); strata are its strata (the independent set: its kinds).
    backend: the page's champion choice ("auto": the faster on this device, "webgpu" or "cpu").
    repeats: each prompt's arms run this many rounds back to back, the arm order reversed every other round
    (drift over a round then cancels between arms), round r with seed SEED + r for every arm (a sampled
    answer differs between rounds); the summary takes medians over the rounds.
    keep_prompt_kv: rounds after a prompt's first start every app arm from the prompt's cached KV rows (no
    prefill: a long prompt's 25 s is paid once per arm, in round 0, where TTFT is measured); decode is timed
    as in round 0, and auto still starts each answer from its priors.
    peer_gguf_path: the GGUF the llama.cpp peer runs (default: peer_gguf(model)).
    call_timeout_s: the most one arm may take for one prompt; a peer past it is not run again (its
    later prompts record why), the app's page past it ends the run (records.jsonl keeps what ran)."""
    from playwright.sync_api import sync_playwright

    from pyodide_app.package_check import load_manifest

    from .plots import write_plots
    from .serve import make_server
    from .site import add_bench_peer, build_site

    arms = [a for a in ARMS if arm_names is None or a.name in arm_names]
    if "none" not in [a.name for a in arms]:
        raise SystemExit("bench: the `none` arm is the baseline and must run")
    items = workload(strata, per_stratum, sampled_per_stratum, workload_name)
    out.mkdir(parents=True, exist_ok=True)
    (out / "records.jsonl").unlink(missing_ok=True)
    site = Path(tempfile.mkdtemp(prefix="bench-site-"))
    build_site(model, site)
    manifest = load_manifest(model)
    gguf = None
    if any(a.peer == "wllama" for a in arms):  # the llama.cpp peer's page and model file, only when it runs
        gguf = peer_gguf_path or peer_gguf(manifest, site)
        add_bench_peer(site, gguf)
    render = prompt_renderer(model, manifest)
    server = make_server(site, port=0, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/?nosw&backend={backend}"
    started = time.perf_counter()
    records: list[dict] = []
    try:
        with sync_playwright() as playwright:
            instance = launch(playwright, browser)
            context = instance.new_context()
            page, cold = open_page(context, url)
            log(f"cold load {cold['load']['total_s']:.1f} s on {cold['backend']}: {cold['adapter']}")
            page.close()
            page, info = open_page(context, url)  # same profile: model files come from the Cache API
            log(
                f"warm load {info['load']['total_s']:.1f} s ({info['load']['model_files_from_cache']} of "
                f"{info['load']['model_files']} files cached)"
            )
            auto_costs = {}  # setting -> the engine's auto block (policy version, costs of that kind of sampling)
            if any(a.proposer == "auto" for a in arms):  # auto measures its costs per kind: not in a timed arm
                longest_first = sorted({json.dumps(i["messages"]) for i in items}, key=len, reverse=True)
                settings = sorted({i["setting"] for i in items})
                for setting in settings:  # the longest prompt: a long one has its context's price measured too
                    done = warm_auto(page, json.loads(longest_first[0]), setting, call_timeout_s)
                    auto_costs[setting] = done.get("speculative", {}).get("auto")
                    log(f"auto ({setting}): {auto_costs[setting]}")
                for messages in longest_first[1:]:  # and each other long prompt's key length (costs.key_length)
                    done = warm_auto(page, json.loads(messages), settings[0], call_timeout_s)
                    if done.get("usage", {}).get("prompt_tokens", 0) < LONG_CONTEXT:
                        break
            peer_page = open_peer_page(context, url) if gguf is not None else None  # a second tab, same session
            first_greedy = next((i for i in items if i["setting"] == "greedy"), None)
            hung: set[str] = set()  # peers that gave no answer once: not run again
            rounds = [(item, repeat) for item in items for repeat in range(repeats)]
            for index, (item, repeat) in enumerate(rounds):
                for arm in arms if repeat % 2 == 0 else arms[::-1]:
                    if not runs_on(arm, item, first_greedy) or (arm.name == SLOW_PEER and repeat):
                        continue
                    if arm.name in hung:
                        record = {"arm": arm.name, **item, "error": "not run: this peer hung on an earlier prompt"}
                    else:
                        keep_kv = keep_prompt_kv and repeat > 0
                        # Each repeat its own seed, every arm the same: a sampled cell's pairs are distinct
                        # answers (one seed made every repeat the same answer: 12 pairs, 3 samples).
                        seed = SEED + repeat
                        record = run_arm(page, arm, item, max_tokens, peer_page, render, call_timeout_s, keep_kv, seed)
                        if "error" in record and arm.peer == "wllama" and peer_page is not None:
                            # A hang or a failure of llama.cpp's wasm build (seen once in CI, 2 threads): a fresh
                            # tab and one more try
                            log(f"{arm.name} failed ({record['error']}): reopening its tab and trying once more")
                            first_error = record["error"]
                            peer_page.close()
                            peer_page = open_peer_page(context, url)
                            record = {
                                **run_arm(page, arm, item, max_tokens, peer_page, render, call_timeout_s, seed=seed),
                                "retried": True,
                                "first_error": first_error,
                            }
                    if record.get("hung"):
                        hung.add(arm.name)
                    record["repeat"] = repeat
                    records.append(record)
                    out.mkdir(parents=True, exist_ok=True)
                    with open(out / "records.jsonl", "a") as raw:  # kept even if the run dies later
                        raw.write(json.dumps(record) + "\n")
                    where = f"{index + 1}/{len(rounds)} {item['setting']} {item['stratum']}"
                    log(f"[{where}] {arm.name}: {outcome(record)}")
            kernel = profile = None
            if info["backend"] == "WebGPU":
                kernel = call(page, "(n) => window.specChat.kernel(n)", kernel_repeats, call_timeout_s)
                profile = {
                    rows: call(
                        page, "([t, n]) => window.specChat.profile(t, n)", [rows, kernel_repeats], call_timeout_s
                    )
                    for rows in (1, 5)
                }
            instance.close()
    finally:
        server.shutdown()
    decode = token_decoder(model, manifest)
    for record in records:  # greedy peers: do they produce the champion's answer?
        base = next(
            (
                r
                for r in records
                if r["arm"] == "none"
                and r["setting"] == "greedy"
                and r["prompt"] == record["prompt"]
                and r["repeat"] == record["repeat"]
            ),
            None,
        )
        if record["arm"].startswith("ort-") and "tokens" in record:
            record["agrees_with_champion"] = (
                base is not None and base.get("tokens", [])[: len(record["tokens"])] == record["tokens"]
            )
        elif record["arm"].startswith("wllama") and "text" in record and base is not None and "tokens" in base:
            # llama.cpp is another implementation: its text may part from ours at a near-tie (reported, not failed)
            ours = decode(base["tokens"])
            record["agrees_with_champion"] = ours.startswith(record["text"]) or record["text"].startswith(ours)
    summary = summarize(records, arms)
    result = {
        "browser": browser,
        "adapter": info["adapter"],
        "backend": info["backend"],
        "model": str(model),
        "max_tokens": max_tokens,
        "repeats": repeats,
        "keep_prompt_kv": keep_prompt_kv,
        "seed": SEED,  # repeat r ran with SEED + r
        "settings": SETTINGS,
        "arms": [asdict(a) for a in arms],
        "workload": workload_name,
        "workload_sha256": workload_sha256(workload_name),
        "strata": sorted({i["stratum"] for i in items}),
        "load": {"cold": cold["load"], "warm": info["load"]},
        "memory_bytes": info["memory"],
        "backend_choice": info.get("choice"),
        "kernels": info.get("kernels"),
        "auto": auto_costs,
        "peer_gguf": str(gguf) if gguf else None,
        "kernel": kernel,
        "kernel_profile_ms": profile,
        "bytes_read_back_per_round": 20,
        "wall_s": time.perf_counter() - started,
        "summary": summary,
        "records": records,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    bars = auto_bars(summary)
    identity = identical_answers(records)
    (out / "table.md").write_text(
        table(summary)
        + (f"\n## auto's bars\n\n{bars}" if bars else "")
        + (f"\n## identical answers\n\n{identity}\n" if identity else "")
    )
    write_plots(result, out)
    return result
