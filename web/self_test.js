// self_test.js — "Is it exact on this device?" in the model dialog: runs the engine's self-test
// (pyodide_app/self_test.py through the worker's selfTest call), says what each check means in plain words,
// keeps the last report per backend|device|package in localStorage, and offers the CPU path when WebGPU fails.
const REPORTS_KEY = "spec-chat.self-test";  // {"<backend>|<adapter>|<champion weights hash>": report}

const CHECK_WORDS = {
  batch_invariance: "Same result whether a token is checked alone or with up to 8 guesses",
  golden_greedy: "Writes exactly the answers recorded when the model was packaged",
  philox: "Random numbers are the recorded ones",
  verify_fixtures: "Accept/reject decisions are the recorded ones",
};

const reports = () => JSON.parse(localStorage.getItem(REPORTS_KEY) || "{}");

export function lastReport(key) {
  return reports()[key] ?? null;
}

function remember(report) {
  localStorage.setItem(REPORTS_KEY, JSON.stringify({ ...reports(), [report.key]: report }));
}

// What a result means for the person using the page.
function summary(report) {
  const when = new Date(report.at).toLocaleString();
  const where = report.backend === "WebGPU" ? `WebGPU, ${report.kernel_variant} kernels, on ${report.adapter}`
    : `the CPU path, ${report.cpu_champion === "fallback" ? "compact" : "float32"} champion`;
  if (report.passed) {
    return `Exact on this device: all ${report.checks.length} checks passed in ${report.seconds.toFixed(1)} s (${where}, ${when}). ` +
      "Speculative answers here are exactly what the model alone would write.";
  }
  const compact = report.cpu_champion === "fallback" && report.checks.every((c) => c.passed || c.name === "batch_invariance")
    ? " This is the low-memory CPU path: its numbers shift slightly with how many tokens are checked at once, so an answer " +
      "can differ where two words are almost equally likely. That is known for this path; the float32 CPU path does not do it."
    : "";
  return `Not exact on this device: ${report.checks.filter((c) => !c.passed).length} of ${report.checks.length} checks failed ` +
    `(${where}, ${when}). Speculative answers may differ from what the model alone would write.${compact}`;
}

// Shows a report (or none yet) in the dialog's elements {summary, list, useCpu}.
export function showReport(elements, report) {
  elements.summary.textContent = report ? summary(report)
    : "Not checked on this device yet. The check compares this device's results with values recorded when the model was packaged.";
  elements.summary.dataset.passed = report ? String(report.passed) : "";
  elements.list.replaceChildren(...(report?.checks ?? []).map((check) => {
    const item = document.createElement("li");
    item.dataset.check = check.name;
    item.dataset.passed = String(check.passed);
    const mark = Object.assign(document.createElement("strong"), { textContent: check.passed ? "✓ passed" : "✗ failed" });
    item.append(mark, ` ${CHECK_WORDS[check.name] ?? check.name}. `,
      Object.assign(document.createElement("span"), { className: "hint", textContent: check.detail }));
    return item;
  }));
  elements.useCpu.hidden = !report || report.passed || report.backend !== "WebGPU";
}

// Runs the self-test with `call` (the worker call), shows and keeps its report; returns it.
export async function runSelfTest(call, elements) {
  elements.run.disabled = true;
  elements.summary.textContent = "Checking this device… (about half a minute on a slow one; answers wait meanwhile)";
  elements.summary.dataset.passed = "";  // no verdict while checking (an earlier report's is gone)
  elements.list.replaceChildren();
  try {
    const report = await call();
    remember(report);
    showReport(elements, report);
    return report;
  } catch (error) {
    elements.summary.textContent = `The check could not run: ${error.message || error}`;
    return null;
  } finally {
    elements.run.disabled = false;
  }
}
