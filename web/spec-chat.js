// spec-chat.js — the embeddable API: an OpenAI-style chat engine for any page of this origin, running the
// same worker (worker.js) as the chat page. Types: spec-chat.d.ts; example: examples/minimal.html.
//
//   const engine = await createEngine({ model: "./model/", onProgress });
//   for await (const chunk of await engine.chat.completions.create({ messages, stream: true })) …
//
// One engine per page at a time (the worker holds ~0.2–0.6 GB); unload() frees it for another.
import { WorkerClient } from "./worker_client.js";

export const PROPOSERS = ["auto", "none", "prompt_lookup", "neural", "hybrid"];
const ROLES = ["system", "user", "assistant"];
let active = null;  // the page's engine, until unloaded

// Every failure carries the engine's stable code (pyodide_app/errors.py): INVALID_SETTINGS, PROMPT_TOO_LONG,
// DEVICE, DRAFT_RUNTIME, …; and LOAD (the model did not load), ENGINE_EXISTS, UNLOADED, SELF_TEST (the
// self-test could not run at all; a check that fails is a report with passed: false, not an error).
export class SpecChatError extends Error {
  constructor(code, message, extra = {}) {
    super(message);
    this.name = "SpecChatError";
    this.code = code;
    Object.assign(this, extra);
  }
}

const invalid = (message) => new SpecChatError("INVALID_SETTINGS", message);
const abortError = () => new DOMException("The request was aborted", "AbortError");

// Rejects arguments the engine could never run, before any work (the engine checks ranges again).
function checkParams(p) {
  if (!p || typeof p !== "object") throw invalid("create() takes one object: {messages, …}");
  if (!Array.isArray(p.messages) || !p.messages.length) throw invalid("messages must be a non-empty array");
  p.messages.forEach((m, i) => {
    if (!m || !ROLES.includes(m.role)) throw invalid(`messages[${i}].role must be one of ${ROLES.join(", ")}`);
    if (typeof m.content !== "string") throw invalid(`messages[${i}].content must be a string`);
  });
  const number = (key, ok, wanted) => {
    if (p[key] === undefined || p[key] === null) return;
    if (typeof p[key] !== "number" || !Number.isFinite(p[key]) || !ok(p[key])) throw invalid(`${key} must be ${wanted}, got ${p[key]}`);
  };
  number("temperature", (v) => v >= 0, "a number >= 0");
  number("top_p", (v) => v > 0 && v <= 1, "in (0, 1]");
  number("top_k", (v) => Number.isInteger(v) && v >= 0, "a whole number >= 0");
  number("repetition_penalty", (v) => v > 0, "a number > 0");
  number("max_tokens", (v) => Number.isInteger(v) && v >= 1, "a whole number >= 1");
  number("seed", (v) => Number.isSafeInteger(v) && v >= 0, "a whole number >= 0");
  const spec = p.speculative ?? {};
  if (spec.proposer !== undefined && !PROPOSERS.includes(spec.proposer)) throw invalid(`speculative.proposer must be one of ${PROPOSERS.join(", ")}`);
  if (p.signal !== undefined && !(p.signal instanceof AbortSignal)) throw invalid("signal must be an AbortSignal");
}

// The engine request (docs/ENGINE.md) for OpenAI-style params; fields not given keep the engine's defaults.
function engineRequest(p) {
  const request = { messages: p.messages.map(({ role, content }) => ({ role, content })) };
  const last = p.messages.at(-1);
  if (p.continue_final_message && last.tokens !== undefined) request.messages.at(-1).tokens = last.tokens;
  for (const key of ["max_tokens", "temperature", "top_p", "top_k", "repetition_penalty", "seed", "stop"]) {
    if (p[key] !== undefined && p[key] !== null) request[key] = p[key];
  }
  if (p.speculative) {
    request.speculative = Object.fromEntries(["proposer", "k", "adaptive"].filter((k) => p.speculative[k] !== undefined)
      .map((k) => [k, p.speculative[k]]));
  }
  if (p.continue_final_message) request.continue_final_message = true;
  return request;
}

// The extras every result carries under `speculative`: what ran, how well it drafted, how to reproduce it.
function extras(done) {
  const s = done.speculative;
  return { proposer: s.proposer, k: s.k, accepted: s.accepted, proposed: s.proposed, acceptance_rate: s.acceptance_rate,
    tokens_per_champion_call: s.tokens_per_champion_call, tokens_per_second: s.tokens_per_second, seed: done.seed,
    fallback_code: s.fallback_code, auto: s.auto ?? null, tokens: done.tokens, answer_text: done.answer_text, time_s: s.time_s, receipt: done.receipt };
}

class Engine {
  constructor(client, info, model) {
    this.client = client;
    this.details = info;  // the worker's whole ready message (the chat page reads it; info() is the stable subset)
    this.model = model;
    this.busy = Promise.resolve();  // requests run one after another
    this.unloaded = false;
    this.chat = { completions: { create: (params) => this.create(params) } };
  }

  // {model, backend, adapter, kernel_variant, limits: {context, k_max, …}, draft, proposers}
  info() {
    const i = this.details;
    return { model: i.model, license: i.license, backend: i.backend, adapter: i.adapter,
      kernel_variant: i.kernels?.family ?? null, limits: { ...i.limits }, draft: i.draftKind, proposers: [...i.proposers.all] };
  }

  async create(params) {
    if (this.unloaded) throw new SpecChatError("UNLOADED", "this engine was unloaded");
    checkParams(params);
    if (params.signal?.aborted) throw abortError();
    const request = engineRequest(params);
    const id = `chatcmpl-${crypto.randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    const chunks = this.stream(request, params.signal);
    if (params.stream) return this.chunks(chunks, id, created);
    let content = "";
    let done = null;
    for await (const event of chunks) {
      if (event.type === "delta") content += event.text;
      else done = event;
    }
    return { id, object: "chat.completion", created, model: this.model,
      choices: [{ index: 0, message: { role: "assistant", content: done.text }, finish_reason: done.finish_reason }],
      usage: done.usage, speculative: extras(done) };
  }

  async *chunks(events, id, created) {
    const chunk = (delta, finish_reason = null, more = {}) => ({ id, object: "chat.completion.chunk", created,
      model: this.model, choices: [{ index: 0, delta, finish_reason }], ...more });
    yield chunk({ role: "assistant", content: "" });
    for await (const event of events) {
      if (event.type === "delta") { if (event.text) yield chunk({ content: event.text }); }
      else yield chunk({}, event.finish_reason, { usage: event.usage, speculative: extras(event) });
    }
  }

  // The worker's events for one request, in order: deltas, then the done event. Throws SpecChatError for a
  // refused request or an answer that failed, AbortError when the signal stopped it.
  async *stream(request, signal) {
    const queue = [];
    let wake = null;
    const push = (item) => { queue.push(item); wake?.(); };
    this.afterOthers(() => {
      if (signal?.aborted) { push({ type: "aborted" }); return; }
      const onAbort = () => this.client.stop();
      signal?.addEventListener("abort", onAbort, { once: true });
      return this.client.chat(request, push).then(() => {
        signal?.removeEventListener("abort", onAbort);
        push({ type: "end" });
      });
    });
    for (;;) {
      if (!queue.length) await new Promise((resolve) => { wake = resolve; });
      wake = null;
      const event = queue.shift();
      if (event.type === "aborted") throw abortError();
      if (event.type === "rejected") throw new SpecChatError(event.code, event.message);
      if (event.type === "delta") { yield event; continue; }
      if (event.type === "done") {
        if (event.finish_reason === "cancelled" && signal?.aborted) throw abortError();
        if (event.error) throw new SpecChatError(event.error.code, event.error.message, { partial: event.text });
        yield event;
      }
      if (event.type === "end") return;
    }
  }

  // "Is it exact on this device?" (pyodide_app/self_test.py): {passed, checks: [{name, passed, detail, seconds}],
  // seconds, adapter, backend, kernel_variant, cpu_champion, key, at}. Runs after any request in progress.
  selfTest() {
    if (this.unloaded) return Promise.reject(new SpecChatError("UNLOADED", "this engine was unloaded"));
    return this.afterOthers(() => this.client.call("selfTest")).catch((error) => { throw new SpecChatError("SELF_TEST", String(error.message || error)); });
  }

  // How much of a conversation fits with `room` tokens left for the answer: {dropped, prompt_tokens, fits, limit}.
  fit(messages, room) {
    return this.client.call("fit", { messages, room });
  }

  // The engine's own events for one request (docs/ENGINE.md: delta with token ids, done with every number,
  // rejected), each to onEvent; resolves when the answer has ended. What the chat page streams with; it runs
  // after any request in progress.
  run(request, onEvent) {
    if (this.unloaded) return Promise.reject(new SpecChatError("UNLOADED", "this engine was unloaded"));
    return this.afterOthers(() => this.client.chat(request, onEvent));
  }

  // Runs work() once every request and check queued before it has ended; the next one waits for this one.
  afterOthers(work) {
    const turn = this.busy.then(work);
    this.busy = turn.catch(() => {});
    return turn;
  }

  // Calls for the chat page and the benchmarks (kernel, profile, peer, forget).
  call(type, payload) {
    return this.client.call(type, payload);
  }

  stop() {
    this.client.stop();
  }

  unload() {
    if (this.unloaded) return;
    this.unloaded = true;
    this.client.worker.terminate();
    if (active === this) active = null;
  }
}

// Loads the model in its own worker; resolves when it can answer. options: model (folder URL, default the
// site's), onProgress({phase, done, total, label}), onFatal(message) (a failure after loading, e.g. device
// loss), and the page's load choices (backend, kernels, context, …: worker.js load()).
export function createEngine({ model = null, onProgress = () => {}, onFatal = () => {}, ...load } = {}) {
  if (active) {
    return Promise.reject(new SpecChatError("ENGINE_EXISTS", "this page already has an engine: call unload() on it first"));
  }
  const workerUrl = new URL("./worker.js", import.meta.url);
  return new Promise((resolve, reject) => {
    let engine = null;
    const client = new WorkerClient(workerUrl, {
      onProgress,
      onReady: (info) => {
        engine = active = new Engine(client, info, info.model);
        resolve(engine);
      },
      onFatal: (message) => {
        if (engine) { onFatal(message); return; }
        client.worker.terminate();
        reject(new SpecChatError("LOAD", message));
      },
    });
    active = { loading: true };
    client.load({ kMax: 8, context: 2048, modelBase: model && new URL(model, location.href).href, ...load });
  }).catch((error) => {
    if (active?.loading) active = null;
    throw error;
  });
}
