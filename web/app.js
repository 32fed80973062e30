// app.js — the page: chat with streamed answers, settings (persisted), Compare with charts, load and
// error screens. All model work happens in worker.js; this file only talks to it by messages.
import { renderMarkdown } from "./markdown.js";
import { survivalChart, timeChart } from "./charts.js";

const DEFAULTS = { proposer: "auto", k: 8, adaptive: false, temperature: 0, top_p: 1, top_k: 0,
  repetition_penalty: 1, seed: null, max_tokens: 256 };  // seed null: a fresh random seed per answer
const STORAGE_KEY = "spec-chat-settings";
const $ = (id) => document.getElementById(id);

const worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
const pending = new Map();  // chat id -> {onEvent, resolve}
let nextId = 1;
let busy = false;
let info = null;
let messages = [];  // the conversation sent to the model: [{role, content}]

// ---- settings -----------------------------------------------------------------------------------------
function loadSettings() {
  try { return { ...DEFAULTS, ...JSON.parse(localStorage.getItem(STORAGE_KEY) || "{}") }; } catch { return { ...DEFAULTS }; }
}

function readSettings() {
  const form = $("settings-form");
  const s = {};
  for (const [key, fallback] of Object.entries(DEFAULTS)) {
    const input = form.elements[key];
    if (key === "seed") s[key] = input.value.trim() === "" ? null : Number(input.value);
    else s[key] = typeof fallback === "boolean" ? input.checked : typeof fallback === "number" ? Number(input.value) : input.value;
  }
  return s;
}

function validate(s) {
  const kMax = info?.kMax ?? 8;
  if (!Number.isInteger(s.k) || s.k < 1 || s.k > kMax) return `k must be a whole number from 1 to ${kMax}`;
  if (s.proposer === "auto" && s.adaptive) return "adaptive k does not combine with auto, which chooses k itself";
  if (!(s.temperature >= 0)) return "temperature must be 0 or more";
  if (!(s.top_p > 0 && s.top_p <= 1)) return "top-p must be in (0, 1]";
  if (!Number.isInteger(s.top_k) || s.top_k < 0) return "top-k must be a whole number, 0 or more";
  if (!(s.repetition_penalty > 0)) return "repetition penalty must be above 0";
  if (s.seed !== null && (!Number.isSafeInteger(s.seed) || s.seed < 0)) return "seed must be empty (random) or a whole number, 0 or more";
  if (!Number.isInteger(s.max_tokens) || s.max_tokens < 1) return "max tokens must be a whole number, 1 or more";
  return null;
}

function showSettings(s) {
  const form = $("settings-form");
  for (const [key, value] of Object.entries(s)) {
    const input = form.elements[key];
    if (input.type === "checkbox") input.checked = value; else input.value = value ?? "";
  }
}

function settingsChanged() {
  const s = readSettings();
  const problem = validate(s);
  $("settings-error").hidden = !problem;
  $("settings-error").textContent = problem || "";
  if (!problem) localStorage.setItem(STORAGE_KEY, JSON.stringify(s));
}

function request(s, conversation, overrides = {}) {
  const merged = { ...s, ...overrides };
  return {
    messages: conversation, max_tokens: merged.max_tokens, temperature: merged.temperature, top_p: merged.top_p,
    top_k: merged.top_k, repetition_penalty: merged.repetition_penalty, ...(merged.seed === null ? {} : { seed: merged.seed }),
    speculative: { proposer: merged.proposer, k: merged.proposer === "none" ? 0 : merged.k, adaptive: merged.adaptive },
  };
}

// ---- worker protocol -----------------------------------------------------------------------------------
function runChat(req, onEvent) {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, { onEvent, resolve });
    worker.postMessage({ type: "chat", id, request: req });
  });
}

worker.onmessage = ({ data }) => {
  if (data.type === "progress") {
    const bar = $(`progress-${data.phase}`);
    bar.max = data.total || 1;
    bar.value = data.done;
    $("loading-detail").textContent = data.label || "";
  } else if (data.type === "ready") {
    info = data.info;
    $("loading").hidden = true;
    const kernels = info.kernels ? ` · kernels: ${info.kernels.family}` : "";
    $("backend").textContent = `${info.backend}: ${info.adapter}${kernels}${info.draft ? " · draft: onnxruntime-web wasm" : ""}`;
    showBackendChoice(info);
    if (info.kernels) {
      $("backend").title = `where the champion runs; matmul kernels ${info.kernels.family} (${info.kernels.chosen}` +
        `${Object.keys(info.kernels.timings_ms).length ? ": " + kernelTimingText(info.kernels.timings_ms) : ""})`;
      if (info.kernels.chosen === "timed at load") rememberKernels(info.kernels.key, info.kernels.family);
    }
    setBusy(false);
  } else if (data.type === "fatal") {
    $("loading").hidden = true;
    $("fatal").hidden = false;
    $("fatal-message").textContent = data.message;
    setBusy(true);
  } else if (data.type === "event") {
    pending.get(data.id)?.onEvent(data.event);
  } else if (data.type === "chat-end") {
    pending.get(data.id)?.resolve();
    pending.delete(data.id);
  } else if (data.type === "result") {
    pending.get(data.id)?.resolve(data);
    pending.delete(data.id);
  }
};

// ---- per device and model: the matmul kernel family and the champion backend (timed once, remembered) ----
const KERNELS_KEY = "spec-chat.kernels";  // {"<adapter>|<champion weights hash>": "columns" | "split"}
const BACKEND_CHOICES_KEY = "spec-chat.backend-measured";  // {"<adapter>|<champion weights hash>": "webgpu" | "cpu"}
const BACKEND_KEY = "spec-chat.backend";  // the Settings choice: "auto" | "webgpu" | "cpu"
function remembered(storageKey) {
  try { return JSON.parse(localStorage.getItem(storageKey) || "{}"); } catch { return {}; }
}
function remember(storageKey, key, value) {
  localStorage.setItem(storageKey, JSON.stringify({ ...remembered(storageKey), [key]: value }));
}
const rememberedKernels = () => remembered(KERNELS_KEY);
const rememberKernels = (key, family) => remember(KERNELS_KEY, key, family);
function showBackendChoice(info) {
  const choice = info.choice;
  if (choice.measured && choice.key) remember(BACKEND_CHOICES_KEY, choice.key, choice.runs);
  const where = choice.runs === "webgpu" ? "WebGPU" : "the CPU (WebAssembly)";
  $("backend-why").textContent = `The champion runs on ${where}${choice.why ? `: ${choice.why}` : ""}.`;
}
function kernelTimingText(timings) {
  return Object.entries(timings).map(([family, t]) => `${family} ${t.t1_ms.toFixed(0)} ms (1 row), ${t.t5_ms.toFixed(0)} ms (5 rows)`).join("; ");
}

// ---- automation hooks (build_tools bench drives these through Playwright) -------------------------------
function workerCall(type, payload) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve: (data) => (data.error ? reject(new Error(data.error)) : resolve(data.value)) });
    worker.postMessage({ type, id, ...payload });
  });
}

window.specChat = {
  info: () => info,
  // One request outside the chat log: the done event plus wall time and time to the first token.
  chat: async (req) => {
    const started = performance.now();
    let firstAt = null, firstTokens = 0, done = null;
    await runChat(req, (event) => {
      if (event.type === "delta" && event.tokens.length && firstAt === null) { firstAt = performance.now(); firstTokens = event.tokens.length; }
      if (event.type === "done" || event.type === "rejected") done = event;
    });
    return { done, wall_s: (performance.now() - started) / 1000, ttft_s: firstAt === null ? null : (firstAt - started) / 1000,
             first_tokens: firstTokens };
  },
  kernel: (repeats) => workerCall("kernel", { repeats }),
  profile: (rows, repeats) => workerCall("profile", { rows, repeats }),  // ms per kernel kind (WebGPU only)
  forget: () => workerCall("forget", {}),  // the next request prefills from scratch, like a fresh conversation
  peer: (backend, req) => workerCall("peer", { backend, request: req }),
};

// ---- chat ----------------------------------------------------------------------------------------------
function setBusy(value) {
  busy = value;
  $("input").disabled = value || !info;
  $("send").disabled = value || !info;
  $("stop").disabled = !value || !info;
  $("compare").disabled = value || !info;
}

function bubble(role, text = "") {
  const element = document.createElement("div");
  element.className = `message ${role}`;
  if (role === "user") element.textContent = text;
  $("log").append(element);
  element.scrollIntoView({ block: "end" });
  return element;
}

const FALLBACK_REASONS = {
  DRAFT_RUNTIME: "the draft model failed", DRAFT_NUMERIC: "the draft model produced invalid numbers",
  RESIDUAL_MASS: "a sampler safeguard tripped", VERIFY_RESULT: "the GPU returned an invalid result",
  DEVICE: "the GPU failed", TARGET_NUMERIC: "the model produced invalid numbers",
};

function statsLine(done, temperature) {
  const s = done.speculative;
  const rate = s.tokens_per_second ? `${s.tokens_per_second.toFixed(2)} tokens/s` : "";
  const seed = temperature > 0 ? ` · seed ${done.seed}` : "";
  return `${done.usage.completion_tokens} tokens · ${rate} · ${s.tokens_per_champion_call.toFixed(2)} tokens per champion call · ` +
    (s.auto ? `auto (k ≤ ${s.k}): ${s.auto.chose || "nothing to run"}${s.proposed ? `, accepted ${s.accepted}/${s.proposed}` : ""}`
      : `${s.proposer}${s.proposer !== "none" ? ` k=${s.k}${s.adaptive ? " adaptive" : ""}, accepted ${s.accepted}/${s.proposed}` : ""}`) +
    `${seed} · ${done.finish_reason}`;
}

// A silent fallback changes nothing in the answer's law, but the user asked for speculation: say it did not run.
function fallbackNote(done) {
  const code = done.speculative.fallback_code;
  if (!code) return null;
  return `Speculation was off for this answer (${FALLBACK_REASONS[code] ?? "an internal error"}, ${code}); the model answered alone.`;
}

async function send(text) {
  const s = loadSettings();
  messages.push({ role: "user", content: text });
  bubble("user", text);
  const answer = bubble("assistant");
  const body = document.createElement("div");
  answer.append(body);
  let shown = "";
  setBusy(true);
  await runChat(request(s, messages), (event) => {
    if (event.type === "delta") {
      shown += event.text;
      renderMarkdown(shown, body);
      answer.scrollIntoView({ block: "end" });
    } else if (event.type === "done") {
      answer.dataset.tokens = JSON.stringify(event.tokens);  // for tests and the curious: the exact token ids
      answer.dataset.finish = event.finish_reason;
      answer.dataset.proposed = event.speculative.proposed;  // tests: speculation really ran
      answer.dataset.fallback = event.speculative.fallback_code ?? "";
      answer.dataset.seed = event.seed;
      const stats = document.createElement("div");
      stats.className = "stats";
      stats.textContent = statsLine(event, s.temperature);
      answer.append(stats);
      const fallback = fallbackNote(event);
      if (fallback) {
        const note = document.createElement("div");
        note.className = "stats fallback";
        note.textContent = fallback;
        answer.append(note);
      }
      if (event.error) appendError(answer, `${event.error.message} (${event.error.code})`);
      if (event.finish_reason === "cancelled") appendError(answer, "stopped");
      if (shown) messages.push({ role: "assistant", content: event.text });
      else messages.pop();  // nothing was answered: forget the question
    } else if (event.type === "rejected") {
      answer.dataset.finish = "rejected";
      answer.dataset.tokens = "[]";
      appendError(answer, event.message);
      messages.pop();
    }
  });
  setBusy(false);
  $("input").focus();
}

function appendError(element, text) {
  const note = document.createElement("div");
  note.className = "error";
  note.textContent = text;
  element.append(note);
}

// ---- compare -------------------------------------------------------------------------------------------
async function compare() {
  const lastUser = messages.map((m) => m.role).lastIndexOf("user");
  if (lastUser < 0) { $("settings-error").hidden = false; $("settings-error").textContent = "Ask something first: Compare reruns the last prompt."; return; }
  const conversation = messages.slice(0, lastUser + 1);
  const s = loadSettings();
  setBusy(true);
  const results = [];
  for (const proposer of info.proposers.all) {  // the engine's list (pyodide_app/engine.py PROPOSERS)
    if (info.proposers.need_draft.includes(proposer) && !info.draft) continue;  // auto runs without a draft too
    let done = null;
    await runChat(request(s, conversation, { proposer, temperature: 0 }), (event) => { if (event.type === "done") done = event; });
    if (done) results.push(done);
  }
  setBusy(false);
  showComparison(results);
}

function showComparison(results) {
  const base = results.find((r) => r.speculative.proposer === "none");
  const table = $("compare-table");
  table.replaceChildren();
  const head = table.insertRow();
  for (const title of ["proposer", "tokens/s", "speed-up vs none", "tokens/call", "accepted", "draft s", "verify s", "GPU wait s", "other s"]) {
    head.append(Object.assign(document.createElement("th"), { textContent: title }));
  }
  for (const r of results) {
    const s = r.speculative;
    const speedup = base && base.speculative.tokens_per_second ? s.tokens_per_second / base.speculative.tokens_per_second : null;
    const row = table.insertRow();
    row.dataset.proposer = s.proposer;
    const name = s.auto ? `auto (${s.auto.chose || "none"})` : s.proposer + (s.proposer === "none" ? "" : ` (k=${s.k})`);
    for (const value of [name, s.tokens_per_second?.toFixed(2), speedup?.toFixed(2) + "×",
      s.tokens_per_champion_call.toFixed(2), s.proposed ? `${s.accepted}/${s.proposed}` : "—",
      s.time_s.draft.toFixed(2), s.time_s.verify.toFixed(2), s.time_s.sync.toFixed(2), s.time_s.other.toFixed(2)]) {
      row.insertCell().textContent = value ?? "—";
    }
  }
  const same = results.every((r) => JSON.stringify(r.tokens) === JSON.stringify(results[0].tokens));
  // WebGPU and the float32 CPU champion: each row's logits are bitwise the same however many rows a call
  // scores, so greedy outputs must match exactly. The compact CPU champion (champion.onnx, low-memory
  // fallback): its logits move by ~1e-4 with the number of rows, which can swap two candidates tied to
  // within that (docs/ARCHITECTURE.md, "What holds where").
  const cpu = info?.backend !== "WebGPU" && info?.cpuChampion === "fallback";  // the compact champion.onnx
  $("compare-identity").textContent = same
    ? `Greedy outputs identical across ${results.length} proposers (${results[0]?.tokens.length ?? 0} tokens).`
    : cpu
      ? "Greedy outputs differ. On the CPU fallback this can happen where two candidate tokens are tied to within " +
        "~0.0001 in score: scoring several tokens at once changes the model's arithmetic slightly. Each answer is still " +
        "one the model could give alone."
      : "Greedy outputs DIFFER — this is a bug: on WebGPU speculation must not change the answer.";
  $("compare-identity").className = same || cpu ? "" : "error";
  survivalChart($("survival-chart"), results.filter((r) => r.speculative.proposer !== "none")
    .map((r) => ({ name: r.speculative.proposer, values: r.speculative.survival })));
  timeChart($("time-chart"), results.map((r) => ({ name: r.speculative.proposer, ...r.speculative.time_s })));
  $("compare-results").hidden = false;
}

// ---- wiring --------------------------------------------------------------------------------------------
showSettings(loadSettings());
$("settings-form").addEventListener("input", settingsChanged);
$("open-settings").onclick = () => { $("settings").hidden = false; };
$("close-settings").onclick = () => { $("settings").hidden = true; };
$("compare").onclick = compare;
$("new-chat").onclick = () => { if (!busy) { messages = []; $("log").replaceChildren(); } };
$("stop").onclick = () => worker.postMessage({ type: "stop" });
$("reload").onclick = () => location.reload();
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("input").value.trim();
  if (!text || busy) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
});
setBusy(false);
const params = new URLSearchParams(location.search);
worker.postMessage({
  type: "load", kMax: 8, context: Number(params.get("context")) || 2048,
  kernels: params.get("kernels"), kernelChoices: rememberedKernels(),
  backend: params.get("backend") || localStorage.getItem(BACKEND_KEY) || "auto", backendChoices: remembered(BACKEND_CHOICES_KEY),
  backendFrom: params.get("backend") ? "url" : "settings",
  cpuFloorMs: params.has("cpu_floor_ms") ? Number(params.get("cpu_floor_ms")) : null,
});
$("backend-choice").value = params.get("backend") || localStorage.getItem(BACKEND_KEY) || "auto";
$("backend-choice").addEventListener("change", () => {
  localStorage.setItem(BACKEND_KEY, $("backend-choice").value);
  $("backend-why").textContent = "Reloading the model on the chosen backend…";
  const url = new URL(location.href);
  url.searchParams.delete("backend");
  location.assign(url);
});
if ("serviceWorker" in navigator && !params.has("nosw")) navigator.serviceWorker.register("sw.js").catch(() => {});
