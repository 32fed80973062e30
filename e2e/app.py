"""One driver interface over the page, for Playwright (Chromium, Firefox) and Selenium (WebKitGTK).

Everything goes through the page's own controls (Settings dialog, Send, Stop, New chat, Compare, the
buttons on each message) and the attributes it sets for tests: an answer's `data-tokens` (exact token
ids), `data-finish`, `data-seed`, `data-proposed` and `data-fallback` (speculation really ran), and the
backend chip's `data-detail` (the whole backend description).
No script evaluation in the page: its CSP forbids eval, and the tests should see what users see.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

ANSWER = ".message.assistant[data-finish]"
LOAD_TIMEOUT_S = 600
ANSWER_TIMEOUT_S = 900


@dataclass
class Answer:
    tokens: list[int]
    finish: str
    text: str  # everything shown in the bubble (answer, stats line, errors)
    proposed: int = 0  # draft tokens sent to verification (data-proposed)
    fallback: str = ""  # fallback code when speculation silently did not run (data-fallback)
    seed: int = -1  # the seed the answer used (data-seed)


@dataclass
class CompareRow:
    proposer: str
    tokens_per_second: float
    tokens_per_call: float
    accepted: int | None
    proposed: int | None


@dataclass
class SelfTest:
    passed: bool
    checks: dict[str, bool]  # check name -> passed, as the dialog lists them
    summary: str  # the verdict in words
    offers_cpu: bool  # the "Use the CPU path instead" button is shown


def parse_compare_row(cells: list[str]) -> CompareRow:
    """cells: proposer, tokens/s, speed-up, tokens/call, accepted ("a/p" or "—"), draft s, verify s, GPU wait s,
    other s."""
    accepted = proposed = None
    if "/" in cells[4]:
        accepted, proposed = (int(x) for x in cells[4].split("/"))
    return CompareRow(cells[0].split(" ")[0], float(cells[1]), float(cells[3]), accepted, proposed)


class App:
    """The page as a user drives it. Subclasses supply the few browser-automation primitives."""

    engine = ""

    # -- primitives (per automation library) --------------------------------------------------------
    def goto(self, url: str) -> None: ...
    def reload(self) -> None: ...
    def attribute(self, selector: str, name: str, index: int = 0) -> str | None: ...
    def text(self, selector: str, index: int = 0) -> str: ...
    def value(self, selector: str) -> str: ...  # a form field's current value
    def count(self, selector: str) -> int: ...
    def click(self, selector: str) -> None: ...
    def fill(self, selector: str, value: str) -> None: ...
    def select(self, selector: str, value: str) -> None: ...
    def set_checked(self, selector: str, value: bool) -> None: ...
    def screenshot(self, path: str) -> None: ...
    def cells(self, row_selector: str, index: int) -> list[str]: ...

    def is_hidden(self, selector: str) -> bool:
        return self.attribute(selector, "hidden") is not None

    def wait(self, condition, timeout_s: float, what: str, shown: str = "") -> None:
        """Poll `condition` until true; fail on the fatal screen or at the deadline (quoting `shown`'s text)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if not self.is_hidden("#fatal"):
                raise AssertionError(
                    f"{self.engine}: fatal screen while waiting for {what}: {self.text('#fatal-message')}"
                )
            if time.monotonic() > deadline:
                where = f"; {shown} says: {self.text(shown)!r}" if shown else ""
                raise AssertionError(f"{self.engine}: no {what} after {timeout_s:.0f} s{where}")
            time.sleep(0.1)

    # -- user actions -------------------------------------------------------------------------------
    def wait_ready(self) -> str:
        """Wait for the load screen to go; returns the backend description (fails on a fatal screen)."""
        self.wait(lambda: self.is_hidden("#loading"), LOAD_TIMEOUT_S, "ready page")
        assert self.is_hidden("#fatal"), f"{self.engine}: {self.text('#fatal-message')}"
        return self.attribute("#backend", "data-detail") or ""

    def wait_fatal(self, timeout_s: float = 300) -> str:
        deadline = time.monotonic() + timeout_s
        while self.is_hidden("#fatal"):
            assert time.monotonic() < deadline, f"{self.engine}: no error screen after {timeout_s} s"
            time.sleep(0.1)
        return self.text("#fatal-message")

    def open_settings(self) -> None:
        if self.attribute("#settings", "open") is None:
            self.click("#open-settings")

    def configure(self, **settings) -> None:
        """Set fields of the Settings dialog as a user would, then Save (the dialog stays open, showing what is
        wrong, when a value is invalid)."""
        self.open_settings()
        for name, value in settings.items():
            selector = f"#settings-form [name={name}]"
            if name == "proposer":
                self.select(selector, value)
            elif isinstance(value, bool):
                self.set_checked(selector, value)
            else:
                self.fill(selector, str(value))
        self.click("#save-settings")

    def settings_error(self) -> str | None:
        return None if self.is_hidden("#settings-error") else self.text("#settings-error")

    def send(self, text: str) -> int:
        """Type and send; returns the index of the answer that will come."""
        index = self.count(".message.assistant")
        self.fill("#input", text)
        self.click("#send")
        return index

    def action(self, index: int, action: str, role: str = "assistant") -> None:
        """Click a message's button (data-action: regenerate, continue, edit)."""
        self.click_nth(f".message.{role}", index, f"[data-action={action}]")

    def click_nth(self, selector: str, index: int, inner: str) -> None: ...
    def evaluate(self, function: str, arg=None):
        """Call a JavaScript function (source text, may be async) in the page with one JSON argument; its
        JSON result."""

    def answer(self, index: int) -> Answer:
        self.wait(lambda: self.count(ANSWER) > index, ANSWER_TIMEOUT_S, "answer")
        selector = ".message.assistant"
        return Answer(
            json.loads(self.attribute(selector, "data-tokens", index) or "[]"),
            self.attribute(selector, "data-finish", index) or "",
            self.text(selector, index),
            int(self.attribute(selector, "data-proposed", index) or 0),
            self.attribute(selector, "data-fallback", index) or "",
            int(self.attribute(selector, "data-seed", index) or -1),
        )

    def ask(self, text: str) -> Answer:
        return self.answer(self.send(text))

    def new_chat(self) -> None:
        self.click("#new-chat")

    def compare(self) -> tuple[list[CompareRow], str]:
        """Run Compare on the last prompt; returns the table rows and the identity line."""
        self.open_settings()
        self.click("#compare")
        self.wait(
            lambda: not self.is_hidden("#compare-results") and not self.is_disabled("#compare"),
            ANSWER_TIMEOUT_S,
            "Compare results",
        )
        rows = [
            parse_compare_row(self.cells("#compare-table tr[data-proposer]", i))
            for i in range(self.count("#compare-table tr[data-proposer]"))
        ]
        return rows, self.text("#compare-identity")

    def is_disabled(self, selector: str) -> bool:
        return self.attribute(selector, "disabled") is not None

    def self_test(self) -> SelfTest:
        """Open the model dialog, press "Check this device", wait for the verdict; the dialog stays open."""
        if self.attribute("#settings", "open") is not None:
            self.click("#close-settings")
        if self.attribute("#model-info", "open") is None:
            self.click("#backend")
        # A click lands where the button was drawn: wait for the dialog's last rows before pressing it.
        self.wait(lambda: "measuring" not in self.text("#storage-facts"), 30, "storage facts")
        self.click("#run-self-test")
        summary = "#self-test-summary"
        self.wait(lambda: self.attribute(summary, "data-passed") in ("true", "false"), 300, "self-test", summary)
        checks = {
            self.attribute("#self-test-checks li", "data-check", i): self.attribute(
                "#self-test-checks li", "data-passed", i
            )
            == "true"
            for i in range(self.count("#self-test-checks li"))
        }
        passed = self.attribute("#self-test-summary", "data-passed") == "true"
        return SelfTest(passed, checks, self.text("#self-test-summary"), not self.is_hidden("#use-cpu"))


class PlaywrightApp(App):
    def __init__(self, page, engine: str):
        self.page = page
        self.engine = engine

    def goto(self, url):
        self.page.goto(url)

    def reload(self):
        self.page.reload()

    def attribute(self, selector, name, index=0):
        return self.page.locator(selector).nth(index).get_attribute(name)

    def text(self, selector, index=0):
        return self.page.locator(selector).nth(index).text_content() or ""

    def value(self, selector):
        return self.page.locator(selector).input_value()

    def count(self, selector):
        return self.page.locator(selector).count()

    def click(self, selector):
        self.page.locator(selector).click()

    def fill(self, selector, value):
        field = self.page.locator(selector)
        field.clear()  # Playwright's fill appends to a number input in Firefox ESR 153 unless cleared first
        field.fill(value)

    def select(self, selector, value):
        self.page.locator(selector).select_option(value)

    def click_nth(self, selector, index, inner):
        self.page.locator(selector).nth(index).locator(inner).click()

    def set_checked(self, selector, value):
        self.page.locator(selector).set_checked(value)

    def screenshot(self, path):
        self.page.screenshot(path=path, full_page=True)

    def cells(self, row_selector, index):
        return [c.text_content() or "" for c in self.page.locator(row_selector).nth(index).locator("td").all()]

    def evaluate(self, function, arg=None):
        return self.page.evaluate(function, arg)


class SeleniumApp(App):
    def __init__(self, driver, engine: str):
        self.driver = driver
        self.engine = engine

    def _all(self, selector):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def _one(self, selector, index=0):
        found = self._all(selector)
        if len(found) <= index:
            raise AssertionError(f"{self.engine}: no element {selector!r}[{index}]")
        return found[index]

    def goto(self, url):
        self.driver.get(url)

    def reload(self):
        self.driver.refresh()

    def _retry(self, action):
        """Streaming re-renders the answer bubble; an element found a moment ago may be replaced."""
        from selenium.common.exceptions import StaleElementReferenceException

        for _ in range(20):
            try:
                return action()
            except StaleElementReferenceException:
                time.sleep(0.05)
        return action()

    # Reads go through one script call each: WebKitWebDriver fails to make handles for nodes that a re-render
    # replaced ("Stale element found when trying to create the node handle"), even when found again.
    def _read(self, selector, index, expression):
        found = self.driver.execute_script(
            "const e = document.querySelectorAll(arguments[0])[arguments[1]];"
            f"return e === undefined ? {{missing: true}} : {{value: {expression}}};",
            selector,
            index,
        )
        if found.get("missing"):
            raise AssertionError(f"{self.engine}: no element {selector!r}[{index}]")
        return found["value"]

    def attribute(self, selector, name, index=0):
        return self._read(selector, index, f"e.getAttribute({json.dumps(name)})")

    def text(self, selector, index=0):
        return self._read(selector, index, "e.textContent") or ""

    def value(self, selector):
        return self._read(selector, 0, "e.value")

    def count(self, selector):
        return self.driver.execute_script("return document.querySelectorAll(arguments[0]).length", selector)

    def click(self, selector):
        from selenium.common.exceptions import ElementNotInteractableException

        try:
            self._retry(lambda: self._one(selector).click())
        except ElementNotInteractableException:
            # WebKitWebDriver does not scroll inside a modal dialog (the top layer) to reach a button below its
            # fold; scroll it into view, then click as a user would.
            self.driver.execute_script("document.querySelector(arguments[0]).scrollIntoView()", selector)
            self._retry(lambda: self._one(selector).click())

    def fill(self, selector, value):
        def fill_once():
            element = self._one(selector)
            element.clear()
            element.send_keys(value)

        self._retry(fill_once)

    def click_nth(self, selector, index, inner):
        self._retry(lambda: self._one(selector, index).find_element("css selector", inner).click())

    def select(self, selector, value):
        from selenium.webdriver.support.ui import Select

        Select(self._one(selector)).select_by_value(value)

    def set_checked(self, selector, value):
        element = self._one(selector)
        if element.is_selected() != value:
            element.click()

    def screenshot(self, path):
        self.driver.save_screenshot(path)

    def cells(self, row_selector, index):
        return self._read(row_selector, index, "Array.from(e.cells, (c) => c.textContent)")

    def evaluate(self, function, arg=None):
        from selenium.common.exceptions import JavascriptException

        self.driver.set_script_timeout(ANSWER_TIMEOUT_S)
        outcome = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"Promise.resolve().then(() => ({function})(arguments[0]))"
            ".then((value) => done({value: value === undefined ? null : value}),"
            " (error) => done({error: String(error)}));",
            arg,
        )
        if "error" in outcome:
            raise JavascriptException(outcome["error"])
        return outcome["value"]
