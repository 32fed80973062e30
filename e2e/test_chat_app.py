"""The chat app as people use it (synthetic model): conversations that survive a reload, regenerate, edit
and continue, the Settings dialog by keyboard with every field checked, the model and storage dialog,
export, the phone layout (element bounds, not only a picture) and an automated accessibility check."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .conftest import ALL_ENGINES, GPU_ENGINES, ROOT, open_app
from .native import native_done, native_engine, native_tokens, page_request

PROMPT = "hello world"
SETTINGS = {
    "proposer": "prompt_lookup",
    "k": 4,
    "adaptive": False,
    "temperature": 1,
    "top_p": 1,
    "top_k": 0,
    "repetition_penalty": 1,
    "seed": 7,  # a fixed seed: Regenerate must still draw a new one
    "max_tokens": 8,
}
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


def page_url(site_url: str, engine: str) -> str:
    """The native reference runs the columns kernels; a page on WebGPU runs the same family."""
    return site_url + ("?nosw" if engine == "webkitgtk" else "?nosw&kernels=columns")


def expected(synth_package, engine: str, prompt: str, seed: int, max_tokens: int = 8) -> list[int]:
    backend = "cpu" if engine == "webkitgtk" else "webgpu"
    return native_tokens(
        synth_package,
        backend,
        prompt=prompt,
        proposer="prompt_lookup",
        k=4,
        temperature=1,
        seed=seed,
        max_tokens=max_tokens,
    )


def expected_continuation(synth_package, engine: str, prompt: str, cut_seed: int, seed: int) -> list[int]:
    """The native engine carrying on the answer it gave with cut_seed (continue_final_message) with seed."""
    backend = "cpu" if engine == "webkitgtk" else "webgpu"
    request = page_request(prompt, "prompt_lookup", 4, 1, cut_seed, 8)
    cut = native_done(
        synth_package, backend, prompt=prompt, proposer="prompt_lookup", k=4, temperature=1, seed=cut_seed, max_tokens=8
    )
    request["messages"].append({"role": "assistant", "content": cut["text"], "tokens": cut["tokens"]})
    done = list(native_engine(synth_package, backend).chat({**request, "seed": seed, "continue_final_message": True}))
    return done[-1]["tokens"]


def messages(app) -> list[tuple[str, str]]:
    """(role, text) of every message shown, text without the buttons and numbers around it."""
    out = []
    for i in range(app.count(".message")):
        role = "user" if "user" in (app.attribute(".message", "class", i) or "") else "assistant"
        out.append((role, app.text(".message .content", i)))
    return out


def wait_finished(app, index: int, what: str, previous: list[int] | None = None) -> None:
    """Until answer `index` has ended (and its token list changed from `previous`, when given)."""

    def finished() -> bool:
        try:
            return bool(app.attribute(".message.assistant", "data-finish", index)) and (
                json.loads(app.attribute(".message.assistant", "data-tokens", index) or "null") != previous
            )
        except AssertionError:  # not there (yet, or replaced while we looked)
            return False

    app.wait(finished, 300, what)


@pytest.mark.parametrize("engine", ALL_ENGINES)
def test_a_conversation_survives_reload_and_answers_can_be_regenerated_edited_and_continued(
    playwright_instance, site_url, synth_package, artifacts, engine
):
    with open_app(playwright_instance, engine, page_url(site_url, engine), SETTINGS) as app:
        app.wait_ready()
        first = app.ask(PROMPT)
        assert first.finish == "length" and len(first.tokens) == 8 and first.seed == 7, first
        assert first.tokens == expected(synth_package, engine, PROMPT, first.seed), "not the native answer for its seed"

        again = first
        for _ in range(6):  # a new random seed each time; until an answer is cut by the limit (Continue needs one)
            previous = again
            app.action(0, "regenerate")  # another answer, and the one the native engine gives for its seed
            wait_finished(app, 0, "regenerated answer", previous.tokens)
            again = app.answer(0)
            assert app.count(".message.assistant") == 1 and again.seed != previous.seed, (previous.seed, again.seed)
            assert again.tokens != previous.tokens
            assert again.tokens == expected(synth_package, engine, PROMPT, again.seed)
            if again.finish == "length":
                break
        assert again.finish == "length", again

        app.action(0, "continue")  # the cut answer carries on in the same bubble
        wait_finished(app, 0, "continued answer", again.tokens)
        continued = app.answer(0)
        assert continued.tokens[:8] == again.tokens and len(continued.tokens) == 16, continued
        assert continued.tokens[8:] == expected_continuation(synth_package, engine, PROMPT, again.seed, continued.seed)
        assert app.count(".message.assistant") == 1

        app.action(0, "edit", role="user")  # edit and resend: the question and everything after it are replaced
        assert app.value("#input") == PROMPT
        assert not app.is_hidden("#editing")
        app.fill("#input", "hello there")
        app.click("#send")
        wait_finished(app, 0, "the answer to the edited question", continued.tokens)
        edited = app.answer(0)
        assert [role for role, _ in messages(app)] == ["user", "assistant"]
        assert messages(app)[0][1] == "hello there"
        assert edited.tokens == expected(synth_package, engine, "hello there", edited.seed)

        app.ask("one more question")
        before = messages(app)
        tokens = [app.attribute(".message.assistant", "data-tokens", i) for i in range(2)]
        app.screenshot(str(artifacts / f"chat-{engine}-conversation.png"))
        app.reload()
        app.wait_ready()
        assert messages(app) == before, "the conversation is restored after a reload"
        assert [app.attribute(".message.assistant", "data-tokens", i) for i in range(2)] == tokens
        assert app.text("#conversation-title") == "hello there"

        app.new_chat()
        assert app.count(".message") == 0
        app.ask("a second chat")
        titles = [app.text("#conversation-list button", i) for i in range(app.count("#conversation-list button"))]
        assert titles == ["a second chat", "hello there"], titles  # newest first
        app.click_nth("#conversation-list li", 1, "button")  # switch back
        app.wait(lambda: messages(app) == before, 30, "the first conversation again")

        app.click("#delete")
        app.click("#delete")  # the button asks once more on its face
        app.wait(lambda: app.count("#conversation-list button") == 1, 30, "one conversation left")
        assert app.text("#conversation-list button") == "a second chat"


def test_rename_and_export(playwright_instance, site_url, artifacts, tmp_path):
    """Chromium only: with Firefox ESR, Playwright reports no download event for any link download (checked
    with a blob link on a blank page), so the files cannot be read back there."""
    engine = "chromium"
    with open_app(playwright_instance, engine, page_url(site_url, engine), SETTINGS) as app:
        app.wait_ready()
        answer = app.ask(PROMPT)
        page = app.page
        page.click("#rename")
        page.fill("#title-field", "Greetings")
        page.keyboard.press("Enter")
        app.wait(lambda: app.text("#conversation-title") == "Greetings", 10, "the new title")
        assert app.text("#conversation-list button") == "Greetings"
        with page.expect_download() as markdown:
            page.click("#export-markdown")
        with page.expect_download() as as_json:
            page.click("#export-json")
        text = Path(markdown.value.path()).read_text()
        data = json.loads(Path(as_json.value.path()).read_text())
        assert markdown.value.suggested_filename == "Greetings.md"
        assert text.startswith("# Greetings") and "## You\n\nhello world" in text, text
        assert data["title"] == "Greetings" and data["messages"][1]["tokens"] == answer.tokens
        app.reload()
        app.wait_ready()
        assert app.text("#conversation-title") == "Greetings"


def field_error(app, name: str) -> str:
    return app.text(f'[data-error-for="{name}"]')


INVALID = [  # every field, each way a user gets it wrong; the engine's limits for the synthetic model
    ("k", "0"),
    ("k", "9"),
    ("k", "2.5"),
    ("temperature", "50"),
    ("temperature", "0.0001"),
    ("temperature", "-1"),
    ("top_p", "0"),
    ("top_p", "1.5"),
    ("top_k", "-1"),
    ("top_k", "1.5"),
    ("repetition_penalty", "50"),
    ("repetition_penalty", "0"),
    ("seed", "-1"),
    ("seed", "1.5"),
    ("max_tokens", "0"),
    ("max_tokens", "100000"),
    ("max_tokens", "512"),  # the synthetic context is 512 tokens: at most 511 fit after a prompt
]


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_settings_dialog_by_keyboard_checks_every_field(playwright_instance, site_url, artifacts, engine):
    with open_app(playwright_instance, engine, page_url(site_url, engine), SETTINGS) as app:
        app.wait_ready()
        page = app.page
        stored = page.evaluate("localStorage.getItem('spec-chat-settings')")
        page.focus("#open-settings")
        page.keyboard.press("Enter")
        assert page.evaluate("document.getElementById('settings').open")
        assert page.evaluate("document.getElementById('settings').contains(document.activeElement)"), "focus moved in"
        for name, value in INVALID:
            app.fill(f"#settings-form [name={name}]", value)
            page.click("#save-settings")
            assert page.evaluate("document.getElementById('settings').open"), f"{name}={value} was accepted"
            assert field_error(app, name), f"{name}={value}: no message at the field"
            assert app.attribute(f"#settings-form [name={name}]", "aria-invalid") == "true"
            assert page.evaluate("document.activeElement.name") == name, "focus goes to the invalid field"
            assert page.evaluate("localStorage.getItem('spec-chat-settings')") == stored, f"{name}={value} was saved"
            app.fill(f"#settings-form [name={name}]", str(SETTINGS[name]))
        app.select("#settings-form [name=proposer]", "auto")
        app.set_checked("#settings-form [name=adaptive]", True)
        page.click("#save-settings")
        assert "adaptive" in field_error(app, "adaptive"), "adaptive k with auto is refused"
        app.set_checked("#settings-form [name=adaptive]", False)
        app.select("#settings-form [name=proposer]", "prompt_lookup")
        app.fill("#settings-form [name=k]", "0")
        app.fill("#settings-form [name=temperature]", "50")
        page.click("#save-settings")
        assert field_error(app, "k") and field_error(app, "temperature"), "every invalid field is shown at once"
        app.screenshot(str(artifacts / f"chat-{engine}-settings-invalid.png"))
        page.keyboard.press("Escape")  # closes without saving; reopening shows the stored values again
        assert not page.evaluate("document.getElementById('settings').open")
        assert page.evaluate("document.activeElement.id") == "open-settings", "focus returns to the opener"
        page.keyboard.press("Enter")
        assert app.attribute("#settings-form [name=k]", "aria-invalid") == "false"
        assert page.input_value("#settings-form [name=k]") == "4"
        app.fill("#settings-form [name=system]", "Answer in one line.")
        app.fill("#settings-form [name=max_tokens]", "5")
        page.keyboard.press("Enter")  # Enter in a field submits the form: Save
        assert not page.evaluate("document.getElementById('settings').open")
        assert json.loads(page.evaluate("localStorage.getItem('spec-chat-settings')"))["max_tokens"] == 5
        answer = app.ask(PROMPT)
        assert len(answer.tokens) == 5 and answer.finish == "length"
        conversation = page.evaluate(
            "new Promise((ok) => indexedDB.open('spec-chat').onsuccess = (e) => e.target.result.transaction("
            "'conversations').objectStore('conversations').getAll().onsuccess = (r) => ok(r.target.result))"
        )
        assert conversation[0]["system"] == "Answer in one line."


def within(box: dict, width: int, what: str) -> None:
    assert box is not None, f"{what} is not shown"
    assert box["x"] >= -0.5 and box["x"] + box["width"] <= width + 0.5, f"{what} overflows: {box}"


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_phone_layout_fits_the_screen(playwright_instance, site_url, artifacts, engine):
    with open_app(playwright_instance, engine, page_url(site_url, engine), SETTINGS) as app:
        page = app.page
        page.set_viewport_size({"width": 390, "height": 844})
        app.wait_ready()
        app.ask(PROMPT)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        header = page.locator("header").bounding_box()
        assert header["height"] < 60, f"the header wraps: {header}"
        for selector in (
            "#backend",
            "#new-chat",
            "#open-settings",
            "#toggle-conversations",
            "#input",
            "#send",
            "#stop",
            ".message.assistant",
            ".message.user",
        ):
            within(page.locator(selector).first.bounding_box(), 390, selector)
        assert page.locator("#conversations").is_hidden(), "the conversation list is behind its button on a phone"
        page.click("#toggle-conversations")
        within(page.locator("#conversations").bounding_box(), 390, "the conversation list")
        app.screenshot(str(artifacts / f"chat-{engine}-phone-list.png"))
        page.click("#toggle-conversations")
        app.screenshot(str(artifacts / f"chat-{engine}-phone.png"))
        app.compare()
        within(page.locator("#settings").bounding_box(), 390, "the Settings dialog")
        within(page.locator(".table-scroll").bounding_box(), 390, "the Compare table's frame")
        assert page.evaluate("document.querySelector('.table-scroll').scrollWidth") >= page.evaluate(
            "document.querySelector('.table-scroll').clientWidth"
        )
        app.screenshot(str(artifacts / f"chat-{engine}-phone-compare.png"))
        page.keyboard.press("Escape")
        page.click("#backend")
        within(page.locator("#model-info").bounding_box(), 390, "the model dialog")
        app.screenshot(str(artifacts / f"chat-{engine}-phone-model.png"))


def test_model_and_storage_dialog_shows_and_clears_what_is_stored(playwright_instance, site_url, artifacts):
    with open_app(playwright_instance, "chromium", page_url(site_url, "chromium"), SETTINGS) as app:
        app.wait_ready()
        app.ask(PROMPT)
        page = app.page
        page.click("#backend")
        app.wait(lambda: "MB" in app.text("#storage-facts"), 30, "storage figures")
        facts = app.text("#model-facts")
        assert "synth:0" in facts and "512 tokens" in facts and "Q4_1" in facts, facts
        model_mb = float(app.text("#storage-facts dd", 0).split()[0])
        assert model_mb > 0, app.text("#storage-facts")
        app.screenshot(str(artifacts / "chat-model-dialog.png"))
        page.click("#clear-model")
        assert "Really" in app.text("#clear-model")
        page.click("#clear-model")
        app.wait(lambda: app.text("#storage-facts dd", 0).startswith("0.0 MB"), 30, "model files deleted")
        assert "spec-chat-model-v1" not in page.evaluate("caches.keys()"), "the model files are gone"
        page.click("#clear-conversations")
        page.click("#clear-conversations")
        app.wait(lambda: app.count(".message") == 0, 30, "conversations deleted")
        assert "deleted" in app.text("#storage-note")
        page.keyboard.press("Escape")
        app.reload()  # the model downloads again and the page works
        app.wait_ready()
        assert app.count(".message") == 0
        assert app.ask(PROMPT).tokens


def axe_violations(page) -> list[dict]:
    """axe-core (vendored from npm for the tests only; the page never loads it) on the page as it is."""
    page.evaluate(AXE.read_text())
    found = page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then((r) => r.violations.map((v) => "
        "({id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 3)})))"
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_accessibility_violations(playwright_instance, site_url, artifacts, scheme):
    with open_app(playwright_instance, "chromium", page_url(site_url, "chromium"), SETTINGS) as app:
        page = app.page
        page.emulate_media(color_scheme=scheme)
        app.wait_ready()
        assert page.evaluate("document.activeElement.id") == "input", "focus goes to the message box when ready"
        app.ask(PROMPT)
        problems = {"chat": axe_violations(page)}
        page.click("#open-settings")
        problems["settings"] = axe_violations(page)
        page.keyboard.press("Escape")
        page.click("#backend")
        time.sleep(0.5)
        problems["model"] = axe_violations(page)
        app.screenshot(str(artifacts / f"chat-{scheme}-model-dialog.png"))
        page.keyboard.press("Escape")
        app.screenshot(str(artifacts / f"chat-{scheme}.png"))
    assert all(not v for v in problems.values()), problems
