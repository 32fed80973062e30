// app.js — the page: conversations kept on this device, streamed answers (regenerate, edit, continue), a
// live token count, the Settings and Model dialogs, Compare, load and error screens. All model work happens
// in worker.js, reached through the embeddable API (spec-chat.js), as any page would; conversations live in
// IndexedDB (store.js).
import { renderMarkdown } from "./markdown.js";
import { copyButton } from "./clipboard.js";
import { runCompare, showComparison } from "./compare.js";
import { download, fileName, toJson, toMarkdown } from "./export.js";
import { buildRequest, fieldErrors, loadSettings, markErrors, readForm, saveSettings, showForm } from "./settings.js";
import { lastReport, runSelfTest, showReport } from "./self_test.js";
import * as store from "./store.js";
import { createEngine } from "./spec-chat.js";

const $ = (id) => document.getElementById(id);
const ANSWER_ROOM = 64;  // tokens kept free for the answer when deciding what fits (else it would end at once)
const MB = 1e6;

let engine = null;        // the loaded engine (spec-chat.js), null until ready
let info = null;          // the worker's ready info
let busy = false;         // an answer (or Compare) is running
let conversation = null;  // the open conversation (store.js shape)
let editing = null;       // index of the user message being edited, or null
let compareCancelled = false;

// ---- loading -------------------------------------------------------------------------------------------
let downloadStart = null;  // [ms, bytes] at the first model progress report
function onProgress({ phase, done, total, label }) {
  const bar = $(`progress-${phase}`);
  bar.max = total || 1;
  bar.value = done;
  if (phase === "model") $("progress-model-text").textContent = `${(done / MB).toFixed(1)} of ${(total / MB).toFixed(1)} MB${eta(done, total)}`;
  $("loading-detail").textContent = label || "";
}

// " · about 40 s left" from the average rate so far (nothing until a second of data is in).
function eta(done, total) {
  const now = performance.now();
  downloadStart ??= [now, done];
  const seconds = (now - downloadStart[0]) / 1000;
  if (seconds < 1 || done >= total || done <= downloadStart[1]) return "";
  const left = (total - done) / ((done - downloadStart[1]) / seconds);
  return ` · about ${left < 60 ? `${Math.ceil(left)} s` : `${Math.ceil(left / 60)} min`} left`;
}

function onReady(readyInfo) {
  info = readyInfo;
  $("loading").hidden = true;
  const kernels = info.kernels ? ` · kernels: ${info.kernels.family}` : "";
  const detail = `${info.backend}: ${info.adapter}${kernels}${info.draft ? " · draft: onnxruntime-web wasm" : ""}`;
  $("backend").textContent = info.backend;
  $("backend").dataset.detail = detail;
  $("backend").title = `${detail} — click for the model, its backend and the storage it uses`;
  showBackendChoice(info);
  if (info.kernels?.chosen === "timed at load") remember(KERNELS_KEY, info.kernels.key, info.kernels.family);
  for (const input of ["k", "max_tokens"]) $("settings-form").elements[input].max = input === "k" ? info.limits.kMax : info.limits.context - 1;
  $("settings-form").elements.top_k.max = info.limits.vocab;
  store.askPersistence();
  setBusy(false);
  refuse(settingsProblem() ?? "");
  updateCount();
  $("input").focus();
}

// Plain words first; the technical message stays behind "Technical detail".
function plainError(message) {
  const file = message.match(/^([\w.-]+\.(?:bin|onnx|json|jinja)): .*(sha256|truncated|bytes)/);
  if (file) return `A model file is damaged: ${file[1]}. Reload to download it again (only that file is fetched again).`;
  if (/GPU device was lost/.test(message)) return "The graphics device stopped working. Reload the page to start again; your conversations are kept.";
  if (/tokenizer/.test(message)) return "The model files do not belong together (a draft made for another tokenizer). The site needs rebuilding.";
  if (/WebGPU validation failed|kernel/.test(message)) return "This browser could not prepare the model's GPU programs.";
  if (/HTTP \d+/.test(message)) return "A file of the site could not be downloaded. Check the connection (needed on the first visit only) and reload.";
  return "Something stopped the model from loading.";
}

function onFatal(message) {
  $("loading").hidden = true;
  $("fatal").hidden = false;
  $("fatal-plain").textContent = plainError(message);
  $("fatal-message").textContent = message;
  setBusy(true);
  $("reload").focus();
}

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
function showBackendChoice(info) {
  const choice = info.choice;
  if (choice.measured && choice.key) remember(BACKEND_CHOICES_KEY, choice.key, choice.runs);
  const where = choice.runs === "webgpu" ? "WebGPU" : "the CPU (WebAssembly)";
  $("backend-why").textContent = `The champion runs on ${where}${choice.why ? `: ${choice.why}` : ""}.`;
}

// ---- conversations ---------------------------------------------------------------------------------------
// The messages the model reads for the first `upTo` messages of the open conversation.
function modelMessages(upTo = conversation.messages.length) {
  const system = conversation.system.trim() ? [{ role: "system", content: conversation.system }] : [];
  return [...system, ...conversation.messages.slice(0, upTo).map(({ role, content }) => ({ role, content }))];
}

async function persist() {
  conversation.updated = Date.now();
  try {
    await store.saveConversation(conversation);
    store.setCurrentId(conversation.id);
    await renderList();
  } catch (error) {  // e.g. storage full or refused: the conversation stays on screen
    refuse(`This conversation could not be saved on this device (${error?.message || error}).`);
  }
}

async function open(id) {
  let stored = null;
  try { stored = id ? await store.getConversation(id) : null; } catch (error) {
    refuse(`Stored conversations cannot be read here (${error?.message || error}); this one will not be kept.`);
  }
  conversation = stored || store.newConversation();
  store.setCurrentId(conversation.id);
  cancelEdit();
  renderConversation();
  await renderList();
  updateCount();
}

async function renderList() {
  const list = $("conversation-list");
  const all = await store.listConversations().catch(() => []);
  if (!all.some((c) => c.id === conversation.id)) all.unshift(conversation);  // new and not yet saved
  list.replaceChildren(...all.map((c) => {
    const item = document.createElement("li");
    const button = Object.assign(document.createElement("button"), { type: "button", textContent: c.title });
    button.dataset.id = c.id;
    button.setAttribute("aria-current", String(c.id === conversation.id));
    button.onclick = () => { if (!busy) { open(c.id); $("conversations").classList.remove("open"); } };
    item.append(button);
    return item;
  }));
  $("conversation-title").textContent = conversation.title;
}

function renderConversation() {
  $("log").replaceChildren();
  conversation.messages.forEach((message, index) => $("log").append(messageElement(message, index)));
  $("conversation-title").textContent = conversation.title;
}

// ---- messages --------------------------------------------------------------------------------------------
const FALLBACK_REASONS = {
  DRAFT_RUNTIME: "the draft model failed", DRAFT_NUMERIC: "the draft model produced invalid numbers",
  RESIDUAL_MASS: "a sampler safeguard tripped", VERIFY_RESULT: "the GPU returned an invalid result",
  DEVICE: "the GPU failed", TARGET_NUMERIC: "the model produced invalid numbers",
};

function messageElement(message, index) {
  const element = document.createElement("article");
  element.className = `message ${message.role}`;
  element.setAttribute("aria-label", message.role === "user" ? "You" : "Assistant");
  const body = document.createElement("div");
  body.className = "content";
  element.append(body);
  if (message.role === "user") {
    body.textContent = message.content;
    element.append(actions(copyButton("Copy", message.content, "Copy this message"), button("Edit", () => startEdit(index), "edit")));
    return element;
  }
  renderMarkdown(message.content, body);
  showAnswerEnd(element, message, index);
  return element;
}

function button(label, onclick, action) {
  const b = Object.assign(document.createElement("button"), { type: "button", textContent: label, onclick });
  b.dataset.action = action;
  return b;
}

function actions(...buttons) {
  const row = document.createElement("div");
  row.className = "actions";
  row.append(...buttons);
  return row;
}

// What ends an answer: its numbers, notes and the actions on it (only the last answer regenerates/continues).
function showAnswerEnd(element, message, index) {
  element.querySelectorAll(":scope > .stats, :scope > details, :scope > .note, :scope > .actions").forEach((e) => e.remove());
  element.dataset.tokens = JSON.stringify(message.tokens ?? []);  // tests and the curious: the exact token ids
  element.dataset.finish = message.finish;
  element.dataset.proposed = message.stats?.proposed ?? 0;  // tests: speculation really ran
  element.dataset.fallback = message.stats?.fallback_code ?? "";
  element.dataset.seed = message.seed ?? "";
  if (message.stats) {
    element.append(Object.assign(document.createElement("div"), { className: "stats", textContent: speedWords(message.stats) }));
    const details = document.createElement("details");
    details.append(Object.assign(document.createElement("summary"), { textContent: "Details" }),
      Object.assign(document.createElement("div"), { className: "stats", textContent: technicalLine(message) }));
    element.append(details);
  }
  for (const text of notes(message)) element.append(Object.assign(document.createElement("div"), { className: "note", textContent: text }));
  if (message.error) element.append(Object.assign(document.createElement("div"), { className: "error", textContent: message.error }));
  const last = index === conversation.messages.length - 1;
  const row = actions(copyButton("Copy", () => conversation.messages[index].content, "Copy this answer"));
  if (last) row.append(button("Regenerate", regenerate, "regenerate"));
  if (last && message.finish === "length") row.append(button("Continue", continueAnswer, "continue"));
  element.append(row);
}

function notes(message) {
  const out = [];
  if (message.finish === "length") out.push("Cut at the token limit — Continue writes on.");
  if (message.finish === "cancelled") out.push("Stopped.");
  if (message.dropped) {
    out.push(`The ${message.dropped} oldest messages were left out of what the model read: the conversation is ` +
      `longer than its ${info?.limits.context ?? ""}-token context.`);
  }
  const code = message.stats?.fallback_code;
  if (code) out.push(`Speculation was off for this answer (${FALLBACK_REASONS[code] ?? "an internal error"}, ${code}); the model answered alone.`);
  return out;
}

// "64 tokens in 3.1 s · first word after 0.4 s · then 23.5 tokens/s" — the time to the first token and the
// writing speed after it, kept apart (the first includes reading the prompt).
function speedWords(stats) {
  const parts = [`${stats.tokens} tokens in ${stats.wall_s.toFixed(1)} s`];
  if (stats.ttft_s !== null) parts.push(`first word after ${stats.ttft_s.toFixed(2)} s`);
  if (stats.decode_tokens_per_s) parts.push(`then ${stats.decode_tokens_per_s.toFixed(1)} tokens/s`);
  return parts.join(" · ");
}

function technicalLine(message) {
  const s = message.stats;
  const learned = s.auto_earlier_rounds ? `, knowing ${s.auto_earlier_rounds} rounds of this chat's earlier answers` : "";
  const how = s.auto ? `auto (k ≤ ${s.k}): ${s.auto || "nothing to run"}${s.proposed ? `, accepted ${s.accepted}/${s.proposed}` : ""}${learned}`
    : `${s.proposer}${s.proposer !== "none" ? ` k=${s.k}${s.adaptive ? " adaptive" : ""}, accepted ${s.accepted}/${s.proposed}` : ""}`;
  return `${how} · ${s.tokens_per_champion_call.toFixed(2)} tokens per model pass · prompt ${s.prompt_tokens} tokens · ` +
    `seed ${message.seed} · finish: ${message.finish}`;
}

// ---- answering -------------------------------------------------------------------------------------------
// Streams one answer into `element` (appending to `prefix` text and tokens when continuing; a prefix saved without
// its tokens keeps none, since the new ones alone would not spell the text); resolves to the
// stored message, or null when the engine refused the request (then `refused` has its words).
async function stream(request, element, prefix = { content: "", tokens: [] }) {
  const body = element.querySelector(".content");
  const started = performance.now();
  let text = prefix.content, firstAt = null, firstTokens = 0, done = null, refused = null;
  await engine.run(request, (event) => {
    if (event.type === "delta") {
      if (firstAt === null && event.tokens.length) { firstAt = performance.now(); firstTokens = event.tokens.length; }
      text += event.text;
      renderMarkdown(text, body);
      element.scrollIntoView({ block: "end" });
    } else if (event.type === "done") {
      done = event;
    } else if (event.type === "rejected") {
      refused = `${event.message} (${event.code})`;
    }
  });
  if (!done) return { refused };
  const end = performance.now();
  const s = done.speculative;
  const writing = firstAt === null ? 0 : (end - firstAt) / 1000;
  const stats = {
    tokens: done.tokens.length, wall_s: (end - started) / 1000, ttft_s: firstAt === null ? null : (firstAt - started) / 1000,
    decode_tokens_per_s: writing > 0 && done.tokens.length > firstTokens ? (done.tokens.length - firstTokens) / writing : null,
    proposer: s.proposer, k: s.k, adaptive: s.adaptive, proposed: s.proposed, accepted: s.accepted,
    tokens_per_champion_call: s.tokens_per_champion_call, fallback_code: s.fallback_code, auto: s.auto?.chose ?? null,
    auto_earlier_rounds: s.auto?.earlier_rounds ?? 0,
    prompt_tokens: done.usage.prompt_tokens,
  };
  const error = done.error ? `${done.error.message} (${done.error.code})` : null;
  return { message: { role: "assistant", content: done.answer_text, tokens: prefix.tokens ? [...prefix.tokens, ...done.tokens] : [],
    finish: done.finish_reason, seed: done.seed, stats, ...(error ? { error } : {}) } };
}

// The model messages without the `dropped` oldest after the system message (Engine.fit_conversation's count).
function withoutOldest(messages, dropped) {
  const system = messages[0].role === "system" ? 1 : 0;
  return [...messages.slice(0, system), ...messages.slice(system + dropped)];
}

// What fits: {dropped, prompt_tokens, fits, limit} for these model messages (Engine.fit_conversation).
function fit(messages, settings) {
  return engine.fit(messages, Math.min(settings.max_tokens, ANSWER_ROOM));
}

function refuse(text) {
  $("composer-error").textContent = text;
}

// Sends the composer's text as a user message (replacing the edited message and all after it, if editing).
// Stored settings out of the engine's range (an older version, or edited by hand) are never sent.
function settingsProblem() {
  const errors = Object.values(fieldErrors(loadSettings(), info.limits));
  return errors.length ? `Your saved settings are out of range (${errors.join("; ")}). Open Settings to fix them.` : null;
}

async function send(text) {
  const problem = settingsProblem();
  if (problem) { refuse(problem); return; }
  const settings = loadSettings();
  const keep = editing ?? conversation.messages.length;
  const messages = [...modelMessages(keep), { role: "user", content: text }];
  const fitted = await fit(messages, settings);
  if (!fitted.fits && !fitted.dropped) {
    refuse(`This message is too long: ${fitted.prompt_tokens} tokens with the conversation; the model reads at most ` +
      `${fitted.limit} (${Math.min(settings.max_tokens, ANSWER_ROOM)} kept free for the answer). Shorten it — your text is still here.`);
    return;
  }
  conversation.messages = conversation.messages.slice(0, keep);
  if (keep === 0 && conversation.autoTitle) conversation.title = text.replace(/\s+/g, " ").slice(0, 48);  // until renamed
  conversation.messages.push({ role: "user", content: text });
  cancelEdit();
  $("input").value = "";
  refuse("");
  renderConversation();
  await persist();
  await answer(buildRequest(settings, withoutOldest(messages, fitted.dropped)), fitted.dropped);
}

// Runs a request whose answer is appended as a new assistant message.
async function answer(request, dropped = 0) {
  setBusy(true);
  const element = document.createElement("article");
  element.className = "message assistant";
  element.append(Object.assign(document.createElement("div"), { className: "content" }));
  $("log").append(element);
  const { message, refused } = await stream(request, element);
  if (message) {
    if (dropped) message.dropped = dropped;
    conversation.messages.push(message);
    showAnswerEnd(element, message, conversation.messages.length - 1);
  } else {  // refused before any work: take the question back into the box, nothing is lost
    const question = conversation.messages.pop();
    element.remove();
    renderConversation();
    $("input").value = question.content;
    refuse(refused);
  }
  await persist();
  renderConversation();
  setBusy(false);
  updateCount();
  $("input").focus();
}

// The last answer again, with a new random seed (a fixed seed in Settings would repeat it).
async function regenerate() {
  if (busy) return;
  const problem = settingsProblem();
  if (problem) { refuse(problem); return; }
  conversation.messages.pop();
  renderConversation();
  const settings = loadSettings();
  const messages = modelMessages();
  const fitted = await fit(messages, settings);
  await answer(buildRequest(settings, withoutOldest(messages, fitted.dropped), { seed: null }), fitted.dropped);
}

// The model messages with the last one's token ids, when the page has them (answers saved by older versions do
// not): the engine then extends exactly the ids the model wrote, which its text need not tokenise back to.
function withTokens(messages, last) {
  if (!last.tokens?.length) return messages;
  return [...messages.slice(0, -1), { ...messages.at(-1), tokens: last.tokens }];
}

// Carries the last answer on after a length stop: the model reads it back open and writes on.
async function continueAnswer() {
  if (busy) return;
  const problem = settingsProblem();
  if (problem) { refuse(problem); return; }
  const index = conversation.messages.length - 1;
  const last = conversation.messages[index];
  const settings = loadSettings();
  const request = { ...buildRequest(settings, withTokens(modelMessages(), last)), continue_final_message: true };
  setBusy(true);
  const element = $("log").querySelectorAll(".message")[index];
  element.removeAttribute("data-finish");
  const { message, refused } = await stream(request, element, last);
  if (message) conversation.messages[index] = message;
  else refuse(refused);
  await persist();
  renderConversation();
  setBusy(false);
  $("input").focus();
}

function startEdit(index) {
  if (busy) return;
  editing = index;
  $("input").value = conversation.messages[index].content;
  $("editing").hidden = false;
  $("input").focus();
  updateCount();
}

function cancelEdit() {
  if (editing !== null) $("input").value = "";
  editing = null;
  $("editing").hidden = true;
}

// ---- the composer's token count --------------------------------------------------------------------------
let countTimer = null;
let countSerial = 0;
function updateCount() {
  clearTimeout(countTimer);
  countTimer = setTimeout(async () => {
    if (!info) return;
    const serial = ++countSerial;
    const text = $("input").value;
    const settings = loadSettings();
    const keep = editing ?? conversation.messages.length;
    const messages = [...modelMessages(keep), ...(text.trim() ? [{ role: "user", content: text }] : [])];
    if (!messages.length) { showCount(null, settings); return; }
    const fitted = await fit(messages, settings);
    if (serial === countSerial) showCount(fitted, settings, Boolean(text.trim()));
  }, 200);
}

function showCount(fitted, settings, typing = false) {
  const count = $("token-count");
  if (!fitted) { count.textContent = ""; count.classList.remove("over"); sendState(true); return; }
  const over = !fitted.fits && !fitted.dropped;
  count.classList.toggle("over", over);
  count.textContent = over
    ? `${fitted.prompt_tokens} of ${fitted.limit} tokens — too long to send (${Math.min(settings.max_tokens, ANSWER_ROOM)} must stay free for the answer)`
    : `${fitted.prompt_tokens} of ${fitted.limit} tokens` +
      (fitted.dropped ? ` — the ${fitted.dropped} oldest messages will be left out` : typing ? "" : " in this conversation");
  sendState(!over);
}

function sendState(canSend) {
  $("send").disabled = busy || !info || !canSend;
  $("send").dataset.blocked = String(!canSend);
}

// ---- settings dialog -------------------------------------------------------------------------------------
function openSettings() {
  const form = $("settings-form");
  showForm(form, loadSettings());
  form.elements.system.value = conversation.system;
  markErrors(form, {});
  $("settings-error").hidden = true;
  $("settings").showModal();
}

// Save: every field checked against the engine's limits; nothing is stored while any is invalid.
function saveSettingsForm(event) {
  event.preventDefault();
  const form = $("settings-form");
  const settings = readForm(form);
  const errors = fieldErrors(settings, info?.limits ?? { kMax: 8, context: 2048, minTemperature: 1e-3, vocab: 49152 });
  const first = markErrors(form, errors);
  const count = Object.keys(errors).length;
  $("settings-error").hidden = !count;
  $("settings-error").textContent = count ? `Not saved: ${Object.values(errors).join("; ")}.` : "";
  if (first) { first.focus(); return; }
  saveSettings(settings);
  if (form.elements.system.value !== conversation.system) {
    conversation.system = form.elements.system.value;
    persist();
  }
  $("settings").close();
  updateCount();
}

// ---- model and storage dialog ----------------------------------------------------------------------------
const selfTestElements = { summary: $("self-test-summary"), list: $("self-test-checks"), useCpu: $("use-cpu"), run: $("run-self-test") };

function facts(list, rows) {
  list.replaceChildren(...rows.flatMap(([term, value]) => [
    Object.assign(document.createElement("dt"), { textContent: term }),
    Object.assign(document.createElement("dd"), { textContent: value }),
  ]));
}

async function openModelInfo() {
  if (info) {
    const bytes = Object.values(info.files).reduce((a, b) => a + b, 0);
    facts($("model-facts"), [
      ["Model", info.model], ["Licence", info.license ?? "not stated in this package"],
      ["Package", `${(bytes / MB).toFixed(1)} MB in ${Object.keys(info.files).length} files (this backend downloads only those it needs)`],
      ["Weights", info.quantisation.map((q) => q.toUpperCase()).join(", ")],
      ["Context", `${info.limits.context} tokens`], ["Runs on", $("backend").dataset.detail],
      ["Draft model", info.draftKind ?? "none"],
    ]);
  }
  showReport(selfTestElements, info && lastReport(info.selfTestKey));
  showStorage(null);  // the rows are there before the dialog opens, so its buttons do not move when they fill
  $("model-info").showModal();
  showStorage(await store.storageReport());
}

// The storage rows of the model dialog; `report` null: still being measured.
function showStorage(report) {
  const measured = (describe) => (report ? describe(report) : "measuring…");
  facts($("storage-facts"), [
    ["Model files", measured((r) => `${(r.model / MB).toFixed(1)} MB`)],
    ["Conversations", measured((r) => `${(r.conversations / 1e3).toFixed(1)} kB`)],
    ["This site in all", measured((r) => (r.total === null ? "unknown" : `${(r.total / MB).toFixed(1)} MB (the browser's estimate)`))],
    ["Kept under storage pressure", measured((r) => (r.persisted ? "yes (persistent storage granted)" : "no: the browser may evict it"))],
  ]);
}

// A destructive button asks once more on its own face before it acts.
function confirmTwice(buttonElement, question, act) {
  const label = buttonElement.textContent;
  buttonElement.onclick = async () => {
    if (buttonElement.dataset.armed !== "true") {
      buttonElement.dataset.armed = "true";
      buttonElement.textContent = question;
      setTimeout(() => { buttonElement.dataset.armed = "false"; buttonElement.textContent = label; }, 5000);
      return;
    }
    buttonElement.dataset.armed = "false";
    buttonElement.textContent = label;
    await act();
  };
}

// ---- compare ---------------------------------------------------------------------------------------------
async function compare() {
  const lastUser = conversation.messages.map((m) => m.role).lastIndexOf("user");
  if (lastUser < 0) {
    $("compare-progress").textContent = "Ask something first: Compare reruns your last question.";
    return;
  }
  compareCancelled = false;
  setBusy(true);
  $("cancel-compare").hidden = false;
  const request = buildRequest(loadSettings(), modelMessages(lastUser + 1));
  const results = await runCompare(engine, info, request, {
    progress: (i, n, proposer) => { $("compare-progress").textContent = `Running ${i + 1} of ${n}: ${proposer}…`; },
    cancelled: () => compareCancelled,
  });
  $("compare-progress").textContent = compareCancelled ? `Cancelled after ${results.length} runs.` : `Done: ${results.length} runs.`;
  $("cancel-compare").hidden = true;
  setBusy(false);
  if (results.length) showComparison(results, info);
}

// ---- automation hooks (build_tools bench drives these through Playwright) -------------------------------
window.specChat = {
  info: () => info,
  // One request outside the chat log: the done event plus wall time and time to the first token.
  chat: async (req) => {
    const started = performance.now();
    let firstAt = null, firstTokens = 0, done = null;
    await engine.run(req, (event) => {
      if (event.type === "delta" && event.tokens.length && firstAt === null) { firstAt = performance.now(); firstTokens = event.tokens.length; }
      if (event.type === "done" || event.type === "rejected") done = event;
    });
    return { done, wall_s: (performance.now() - started) / 1000, ttft_s: firstAt === null ? null : (firstAt - started) / 1000,
             first_tokens: firstTokens };
  },
  kernel: (repeats) => engine.call("kernel", { repeats }),
  profile: (rows, repeats) => engine.call("profile", { rows, repeats }),  // ms per kernel kind (WebGPU only)
  // The next request starts like a fresh conversation: auto's counts forgotten, and (unless keepKv) its prefill
  // from scratch; keepKv keeps the cached KV rows, so a repeated prompt skips its prefill.
  forget: (keepKv = false) => engine.call("forget", { keepKv }),
  peer: (backend, req) => engine.call("peer", { backend, request: req }),
};

// ---- wiring ----------------------------------------------------------------------------------------------
function setBusy(value) {
  busy = value;
  $("input").disabled = !info;  // one can write the next message while an answer streams
  $("send").disabled = value || !info || $("send").dataset.blocked === "true";
  $("stop").disabled = !value || !info;
  $("compare").disabled = value || !info;
  for (const b of document.querySelectorAll("[data-action=regenerate], [data-action=continue], [data-action=edit], #new-chat, #delete")) b.disabled = value;
}

$("open-settings").onclick = openSettings;
$("settings-form").addEventListener("submit", saveSettingsForm);
$("close-settings").onclick = () => $("settings").close();
$("backend").onclick = openModelInfo;
$("close-model-info").onclick = () => $("model-info").close();
$("run-self-test").onclick = () => runSelfTest(() => engine.selfTest(), selfTestElements);
$("use-cpu").onclick = () => {
  localStorage.setItem(BACKEND_KEY, "cpu");
  const url = new URL(location.href);
  url.searchParams.delete("backend");
  location.assign(url);
};
confirmTwice($("clear-model"), "Really delete the model files?", async () => {
  await store.clearModelFiles();
  $("storage-note").textContent = "Deleted. The model keeps running until you leave; the next visit downloads it again.";
  showStorage(await store.storageReport());
});
confirmTwice($("clear-conversations"), "Really delete every conversation?", async () => {
  await store.clearConversations();
  await open(null);
  $("storage-note").textContent = "All conversations were deleted.";
  showStorage(await store.storageReport());
});
$("compare").onclick = compare;
$("cancel-compare").onclick = () => { compareCancelled = true; engine.stop(); };
$("new-chat").onclick = () => { if (!busy) open(null); };
$("stop").onclick = () => engine.stop();
$("reload").onclick = () => location.reload();
$("cancel-edit").onclick = () => { cancelEdit(); updateCount(); };
$("toggle-conversations").onclick = () => {
  const open_ = $("conversations").classList.toggle("open");
  $("toggle-conversations").setAttribute("aria-expanded", String(open_));
};
$("rename").onclick = () => {
  const title = $("conversation-title");
  const field = Object.assign(document.createElement("input"), { value: conversation.title, id: "title-field" });
  field.setAttribute("aria-label", "Conversation title");
  let finished = false;
  const done = async (save) => {
    if (finished) return;  // Enter, then the blur that replacing the field causes
    finished = true;
    field.replaceWith(title);
    if (save && field.value.trim()) { conversation.title = field.value.trim(); conversation.autoTitle = false; await persist(); }
    title.textContent = conversation.title;
    $("rename").focus();
  };
  field.onkeydown = (event) => {
    if (event.key === "Enter") done(true);
    if (event.key === "Escape") { event.preventDefault(); done(false); }
  };
  field.onblur = () => done(true);
  title.replaceWith(field);
  field.select();
};
confirmTwice($("delete"), "Really delete?", async () => {
  await store.deleteConversation(conversation.id);
  const rest = await store.listConversations();
  await open(rest[0]?.id ?? null);
});
$("export-markdown").onclick = () => download(fileName(conversation, "md"), toMarkdown(conversation), "text/markdown");
$("export-json").onclick = () => download(fileName(conversation, "json"), toJson(conversation), "application/json");
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("input").value.trim();
  if (!text || busy || !info) return;
  send(text);
});
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
});
$("input").addEventListener("input", () => { refuse(""); updateCount(); });

setBusy(false);
await open(store.currentId());
const params = new URLSearchParams(location.search);
createEngine({
  onProgress, onFatal, kMax: 8, context: Number(params.get("context")) || 2048,
  kernels: params.get("kernels"), kernelChoices: remembered(KERNELS_KEY),
  backend: params.get("backend") || localStorage.getItem(BACKEND_KEY) || "auto", backendChoices: remembered(BACKEND_CHOICES_KEY),
  backendFrom: params.get("backend") ? "url" : "settings",
  cpuFloorMs: params.has("cpu_floor_ms") ? Number(params.get("cpu_floor_ms")) : null,
}).then((loaded) => { engine = loaded; onReady(loaded.details); }, (error) => onFatal(error.message));
$("backend-choice").value = params.get("backend") || localStorage.getItem(BACKEND_KEY) || "auto";
$("backend-choice").addEventListener("change", () => {
  localStorage.setItem(BACKEND_KEY, $("backend-choice").value);
  $("backend-why").textContent = "Reloading the model on the chosen backend…";
  const url = new URL(location.href);
  url.searchParams.delete("backend");
  location.assign(url);
});
if ("serviceWorker" in navigator && !params.has("nosw")) navigator.serviceWorker.register("sw.js").catch(() => {});
