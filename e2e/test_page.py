"""The page as users meet it (synthetic model): settings panel and Compare, offline after one visit,
and bad input — corrupted shard, mismatched draft, over-long prompt, stop mid-answer."""

from __future__ import annotations

import json
import shutil

import pytest

from .conftest import ALL_ENGINES, open_app, serve_site
from .native import native_tokens

PROMPT = "hello world"
SETTINGS = {
    "proposer": "prompt_lookup",
    "k": 4,
    "adaptive": False,
    "temperature": 0,
    "top_p": 1,
    "top_k": 0,
    "repetition_penalty": 1,
    "seed": 0,
    "max_tokens": 16,
}


@pytest.mark.parametrize("engine", ALL_ENGINES)
def test_settings_panel_and_compare(playwright_instance, site_url, synth_package, artifacts, engine):
    foreign: list[str] = []
    with open_app(playwright_instance, engine, site_url + "?nosw", SETTINGS, foreign) as app:
        app.wait_ready()
        app.configure(proposer="neural", k=3)
        first = app.ask(PROMPT)
        assert first.tokens == native_tokens(
            synth_package, prompt=PROMPT, proposer="neural", k=3, temperature=0, seed=0, max_tokens=16
        )
        assert "neural k=3" in first.text  # the stats line names what ran
        app.configure(k=0)
        assert "k must be" in (app.settings_error() or "")  # invalid: shown, not saved
        app.configure(k=2)
        assert app.settings_error() is None
        rows, identity = app.compare()
        assert "identical across 5 proposers" in identity, identity
        assert [r.proposer for r in rows] == ["none", "prompt_lookup", "neural", "hybrid", "auto"]
        for row in rows:
            assert row.tokens_per_second > 0 and row.tokens_per_call >= 1.0, row
            if row.proposer not in ("none", "auto"):  # auto may rightly run champion-alone rounds only
                assert row.proposed and 0 <= row.accepted / row.proposed <= 1, row
        app.screenshot(str(artifacts / f"page-{engine}-compare.png"))
        checked = app.self_test()  # "Is it exact on this device?" on whichever champion this browser runs
        assert checked.passed and all(checked.checks.values()) and not checked.offers_cpu, checked
        assert set(checked.checks) == {"batch_invariance", "golden_greedy", "philox", "verify_fixtures"}
        assert checked.summary.startswith("Exact on this device: all 4 checks passed"), checked.summary
        app.screenshot(str(artifacts / f"page-{engine}-self-test.png"))
        app.click("#close-model-info")
        app.reload()  # settings persist across visits
        app.wait_ready()
        answer = app.ask(PROMPT)  # the stored settings are used, not the defaults
        assert "neural k=2" in answer.text
    assert foreign == []


def test_the_faster_champion_is_measured_once_and_can_be_switched(
    playwright_instance, site_url, synth_package, artifacts
):
    """Chromium has both paths (WebGPU on SwiftShader, the float32 CPU champion). cpu_floor_ms=0 makes the
    first load time both even on the small synthetic model; the choice is remembered, shown with its reason,
    and Settings can override it (a reload onto the other backend). Every backend answers the native tokens."""
    expected = native_tokens(
        synth_package, prompt=PROMPT, proposer="prompt_lookup", k=4, temperature=0, seed=0, max_tokens=16
    )
    with open_app(playwright_instance, "chromium", site_url + "?nosw&cpu_floor_ms=0", SETTINGS) as app:
        badge = app.wait_ready()
        why = app.text("#backend-why")
        assert "measured at this first load" in why and " ms per token" in why, why
        measured = "CPU" if badge.startswith("CPU") else "WebGPU"
        assert badge.startswith(measured) and f"runs on {'WebGPU' if measured == 'WebGPU' else 'the CPU'}" in why, (
            badge,
            why,
        )
        assert app.ask(PROMPT).tokens == expected
        app.reload()
        assert app.wait_ready().startswith(measured)
        assert "measured at an earlier load" in app.text("#backend-why"), app.text("#backend-why")
        for choice, shown in (("cpu", "CPU"), ("webgpu", "WebGPU")):
            app.click("#open-settings")
            with app.page.expect_navigation():
                app.select("#backend-choice", choice)
            badge = app.wait_ready()
            assert badge.startswith(shown), badge
            assert "chosen in Settings" in app.text("#backend-why")
            app.new_chat()  # the conversation was restored after the reload; the reference is a fresh chat
            assert app.ask(PROMPT).tokens == expected, f"{choice}: tokens differ from the native engine"
        app.click("#open-settings")
        app.screenshot(str(artifacts / "page-backend-choice.png"))


def test_offline_after_the_first_visit_and_no_foreign_requests(playwright_instance, site_url, artifacts):
    foreign: list[str] = []
    with open_app(playwright_instance, "chromium", site_url, SETTINGS, foreign) as app:
        app.wait_ready()
        first = app.ask(PROMPT)
        app.page.evaluate("navigator.serviceWorker.ready.then(() => true)")  # installed: the shell is precached
        app.context.set_offline(True)
        app.reload()
        app.wait_ready()
        assert app.count(".message") == 2, "the conversation is back, offline"
        app.new_chat()
        assert app.ask(PROMPT).tokens == first.tokens
        app.screenshot(str(artifacts / "page-offline.png"))
    assert foreign == []


def fatal_message(playwright, tmp_path, synth_package, engine: str, damage) -> str:
    """The error screen of a site whose package copy was changed by damage(folder)."""
    model = tmp_path / "model"
    shutil.copytree(synth_package, model)
    damage(model)
    url, server = serve_site(model, tmp_path / "site")
    try:
        with open_app(playwright, engine, url + "?nosw") as app:
            return app.wait_fatal()
    finally:
        server.shutdown()


def test_a_corrupted_shard_is_refused_naming_it(playwright_instance, tmp_path, synth_package):
    def flip_a_bit(model):
        shard = model / "champion-000.bin"
        data = bytearray(shard.read_bytes())
        data[1000] ^= 0x10
        shard.write_bytes(bytes(data))

    message = fatal_message(playwright_instance, tmp_path, synth_package, "chromium", flip_a_bit)
    assert "champion-000.bin" in message and "sha256" in message, message


def test_a_damaged_file_is_named_in_plain_words_and_reload_fetches_only_what_is_missing(
    playwright_instance, tmp_path, synth_package, artifacts
):
    """The error screen says which file is damaged in plain words (technical detail behind a toggle); after the
    file is mended, Reload fetches it again but not the files that were already checked and kept."""
    url, server = serve_site(synth_package, tmp_path / "site")
    shard = tmp_path / "site" / "model" / "draft.onnx"  # after champion-000.bin in the load order
    good = shard.read_bytes()
    shard.write_bytes(good[:1000] + bytes([good[1000] ^ 0x10]) + good[1001:])
    try:
        with open_app(playwright_instance, "chromium", url + "?nosw&backend=webgpu") as app:
            app.wait_fatal()
            plain = app.text("#fatal-plain")
            assert plain.startswith("A model file is damaged: draft.onnx."), plain
            assert "sha256" in app.text("#fatal-message")
            app.screenshot(str(artifacts / "page-damaged-file.png"))
            shard.write_bytes(good)
            fetched = []
            app.page.on("request", lambda request: fetched.append(request.url.rsplit("/", 1)[-1]))
            app.click("#reload")
            app.wait_ready()
            assert "draft.onnx" in fetched and "champion-000.bin" not in fetched, fetched
            assert app.ask(PROMPT).tokens
    finally:
        server.shutdown()


def test_a_kernel_that_does_not_compile_is_named(playwright_instance, tmp_path, synth_package):
    """A WGSL error (here: a broken verify kernel in the served site) stops the load with the kernel's name,
    not a later, unexplained failure (gpu.js runs pipeline creation inside error scopes)."""
    url, server = serve_site(synth_package, tmp_path / "site")
    verify = tmp_path / "site" / "vendor" / "shaders" / "verify.wgsl"
    verify.write_text(verify.read_text().replace("let k = cfg.drafts;", "let k: u32 = cfg.temperature;"))
    try:
        with open_app(playwright_instance, "chromium", url + "?nosw&backend=webgpu") as app:
            message = app.wait_fatal()
    finally:
        server.shutdown()
    print(f"\n[page] a broken kernel: {message}")
    assert "kernel verify" in message, message


def test_a_kernel_whose_rows_depend_on_the_batch_fails_the_self_test(
    playwright_instance, tmp_path, synth_package, artifacts
):
    """Negative control: the served matmul kernel scales its stores by 1 + (T - 1) * 2^-20 (a row's result then
    depends on the rows scored with it). The page's self-test must say "Not exact", name batch invariance,
    offer the CPU path, and still show the verdict when the dialog is opened again."""
    url, server = serve_site(synth_package, tmp_path / "site")
    matmul = tmp_path / "site" / "vendor" / "shaders" / "matmul_columns.wgsl"
    store = "y[at] = select(value, y[at] + value, ACCUMULATE)"
    assert store in matmul.read_text()
    matmul.write_text(matmul.read_text().replace(store, store + " * (1.0 + f32(params.rows - 1u) / 1048576.0)"))
    try:
        with open_app(playwright_instance, "chromium", url + "?nosw&backend=webgpu&kernels=columns") as app:
            app.wait_ready()
            checked = app.self_test()
            app.screenshot(str(artifacts / "page-self-test-fails.png"))
            app.click("#close-model-info")
            app.click("#backend")
            shown_again = app.text("#self-test-summary")
    finally:
        server.shutdown()
    print(f"\n[page] perturbed kernel: {checked}")
    assert not checked.passed and checked.offers_cpu and checked.summary.startswith("Not exact on this device"), checked
    assert checked.checks == {"batch_invariance": False, "golden_greedy": True, "philox": True, "verify_fixtures": True}
    assert shown_again == checked.summary


def test_a_draft_with_another_tokenizer_is_refused(playwright_instance, tmp_path, synth_package):
    def other_tokenizer(model):  # the draft was built for a different tokenizer
        manifest = json.loads((model / "manifest.json").read_text())
        manifest["identity"]["draft_tokenizer"] = "0" * 64
        (model / "manifest.json").write_text(json.dumps(manifest))

    message = fatal_message(playwright_instance, tmp_path, synth_package, "firefox", other_tokenizer)
    assert "draft.onnx" in message and "tokenizer" in message, message


def break_draft_at_run_time(model) -> None:
    """draft.onnx still loads (hashes and identity updated) but every run fails: its token ids now pass
    through an extra graph input that no runtime feeds."""
    import hashlib

    import onnx
    from onnx import TensorProto, helper

    path = model / "draft.onnx"
    graph = onnx.load(str(path))
    for node in graph.graph.node:
        node.input[:] = ["shifted_ids" if name == "input_ids" else name for name in node.input]
    graph.graph.node.insert(0, helper.make_node("Add", ["input_ids", "id_shift"], ["shifted_ids"]))
    graph.graph.input.append(helper.make_tensor_value_info("id_shift", TensorProto.INT64, [1]))
    onnx.save(graph, str(path))
    manifest = json.loads((model / "manifest.json").read_text())
    data = path.read_bytes()
    manifest["files"]["draft.onnx"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    manifest["identity"]["draft_weights"] = manifest["files"]["draft.onnx"]["sha256"]
    (model / "manifest.json").write_text(json.dumps(manifest))


def test_a_failing_draft_falls_back_visibly(playwright_instance, tmp_path, synth_package, artifacts):
    """Speculation that could not run is not hidden: the answer (champion alone, same tokens) says so."""
    model = tmp_path / "model"
    shutil.copytree(synth_package, model)
    break_draft_at_run_time(model)
    url, server = serve_site(model, tmp_path / "site")
    try:
        with open_app(playwright_instance, "chromium", url + "?nosw", {**SETTINGS, "proposer": "neural"}) as app:
            app.wait_ready()
            answer = app.ask(PROMPT)
            app.screenshot(str(artifacts / "page-draft-fallback.png"))
    finally:
        server.shutdown()
    assert answer.fallback == "DRAFT_RUNTIME", answer
    assert "Speculation was off for this answer" in answer.text and "draft model failed" in answer.text, answer.text
    assert answer.tokens == native_tokens(
        synth_package, prompt=PROMPT, proposer="none", k=0, temperature=0, seed=0, max_tokens=16
    )


@pytest.mark.parametrize("engine", ["chromium", "webkitgtk"])
def test_over_long_input_is_refused_before_sending_and_stop_keeps_the_answer(
    playwright_instance, site_url, artifacts, engine
):
    with open_app(playwright_instance, engine, site_url + "?nosw", {**SETTINGS, "max_tokens": 511}) as app:
        app.wait_ready()
        long = " ".join(str(i) for i in range(400))  # > 1,000 tokens; the synthetic context is 512
        app.fill("#input", long)
        app.wait(lambda: "too long" in app.text("#token-count"), 120, "the token count refusing the message")
        assert app.is_disabled("#send"), "a message that cannot fit is not sent"
        assert app.value("#input") == long and app.count(".message") == 0, "the text stays, nothing was sent"
        app.screenshot(str(artifacts / f"page-{engine}-too-long.png"))
        app.fill("#input", PROMPT)
        app.wait(lambda: not app.is_disabled("#send"), 60, "Send enabled again")
        index = app.send(PROMPT)
        app.wait(
            lambda: app.count(".message.assistant") > index and app.text(".message.assistant .content", index).strip(),
            120,
            "first tokens",
        )
        app.click("#stop")
        stopped = app.answer(index)
        assert stopped.finish == "cancelled", stopped
        shown = app.text(".message.assistant", index)
        assert shown.strip() and "Stopped." in shown, "the text shown before stop is kept, and said to be stopped"
        assert app.count(".message.assistant .error") == 0, "stopping is not an error"
        content = app.text(".message.assistant .content", index)
        after = app.ask(PROMPT)
        assert after.finish in ("stop", "length") and after.tokens
        assert app.text(".message.assistant .content", index) == content  # earlier answers untouched
        app.screenshot(str(artifacts / f"page-{engine}-stop.png"))


def test_a_long_conversation_leaves_its_oldest_turns_out_visibly(playwright_instance, site_url, artifacts):
    """Three ~200-token questions overflow the synthetic model's 512-token context (64 tokens stay free for the
    answer): the count says so before sending, and the answer says which turns the model did not read."""
    with open_app(playwright_instance, "chromium", site_url + "?nosw", SETTINGS) as app:
        app.wait_ready()
        question = " ".join(str(i) for i in range(60))
        for turn in range(2):
            assert app.ask(f"{turn} {question}").tokens
            assert "left out" not in app.text(".message.assistant", turn)
        app.fill("#input", f"2 {question}")
        app.wait(lambda: "will be left out" in app.text("#token-count"), 60, "the count announcing dropped turns")
        app.click("#send")
        last = app.answer(2)
        assert last.tokens and "oldest messages were left out" in last.text, last.text
        app.screenshot(str(artifacts / "page-dropped-turns.png"))
