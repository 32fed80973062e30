// worker.js — module Web Worker: Pyodide + pyodide_app (the orchestrator), the WebGPU champion,
// the onnxruntime-web draft. Everything is fetched from this origin; model files are checked
// against the manifest's sha256 and kept in the Cache API for the next visit.
//
// main -> worker: {type: "load", kMax, context} | {type: "chat", id, request} | {type: "stop"}
// worker -> main: {type: "progress", phase, done, total} | {type: "ready", info} | {type: "fatal", message}
//                 {type: "event", id, event} | {type: "chat-end", id}

import { GpuHelper } from "./gpu.js";
import { DraftRunner } from "./draft.js";

const MODEL_CACHE = "spec-chat-model-v1";
const HAS_JSPI = typeof WebAssembly.Suspending === "function";  // absent in WebKit (no WebGPU path then)
const state = { cancelled: false };  // read by Python (pyodide_app.browser.JsCancel)
let pyodide = null;
let engine = null;
let runChat = null;

const post = (message) => self.postMessage(message);
const progress = (phase, done, total, label = "") => post({ type: "progress", phase, done, total, label });

async function fetchOk(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response;
}

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

// Bytes of one model file: from the Cache API when present and intact, else fetched; always hash-checked.
async function modelFile(base, name, expected, onBytes) {
  const cache = await caches.open(MODEL_CACHE);
  const url = new URL(base + name, self.location.href).href;
  let bytes = null;
  const cached = await cache.match(url);
  if (cached) {
    bytes = new Uint8Array(await cached.arrayBuffer());
    if (bytes.byteLength !== expected.bytes || (await sha256Hex(bytes)) !== expected.sha256) {
      await cache.delete(url);  // stale or damaged copy: fetch again
      bytes = null;
    }
  }
  if (!bytes) {
    const response = await fetchOk(url);
    const reader = response.body.getReader();
    const chunks = [];
    let received = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      received += value.byteLength;
      onBytes(value.byteLength);
    }
    bytes = new Uint8Array(received);
    let offset = 0;
    for (const chunk of chunks) { bytes.set(chunk, offset); offset += chunk.byteLength; }
    if (bytes.byteLength !== expected.bytes) throw new Error(`${name}: ${bytes.byteLength} bytes, the manifest says ${expected.bytes} (truncated or replaced)`);
    if ((await sha256Hex(bytes)) !== expected.sha256) throw new Error(`${name}: sha256 does not match the manifest (corrupted file)`);
    await cache.put(url, new Response(bytes));
  } else {
    onBytes(bytes.byteLength);
  }
  return bytes;
}

async function loadRuntime(site) {
  progress("runtime", 0, 3, "Python runtime");
  const { loadPyodide } = await import("./vendor/pyodide/pyodide.mjs");
  const lock = await (await fetchOk("./vendor/pyodide/pyodide-lock.json")).text();
  pyodide = await loadPyodide({ indexURL: new URL("./vendor/pyodide/", self.location.href).href, lockFileContents: lock });
  progress("runtime", 1, 3, "orchestrator");
  for (const path of site.python) {
    const text = await (await fetchOk(`./vendor/${path}`)).text();
    const full = `/app/${path}`;
    pyodide.FS.mkdirTree(full.slice(0, full.lastIndexOf("/")));
    pyodide.FS.writeFile(full, text);
  }
  pyodide.runPython("import sys; sys.path.insert(0, '/app')");
  progress("runtime", 2, 3, "draft runtime");
  const ort = await import("./vendor/ort/ort.wasm.min.mjs");
  ort.env.wasm.wasmPaths = new URL("./vendor/ort/", self.location.href).href;
  ort.env.wasm.numThreads = 1;  // 2 threads were slower than 1 for small MatMuls (FACTS.md)
  progress("runtime", 3, 3, "ready");
  return ort;
}

async function load({ kMax, context }) {
  const site = await (await fetchOk("./vendor/site.json")).json();
  const ort = await loadRuntime(site);
  const manifestText = await (await fetchOk(`./${site.model}manifest.json`)).text();
  const manifest = JSON.parse(manifestText);
  const checkManifest = pyodide.pyimport("pyodide_app.manifest").check_manifest;
  try {
    checkManifest(pyodide.toPy(manifest));
  } catch (error) {
    throw new Error(`manifest.json: ${String(error.message || error).split("\n").filter(Boolean).pop()}`);
  }
  progress("gpu", 0, 1, "WebGPU device");
  let gpu = null;
  let fallbackReason = null;
  if (!HAS_JSPI) {
    fallbackReason = "this browser has no JSPI (WebAssembly stack switching), which the WebGPU path needs";
  } else {
    try {
      gpu = await GpuHelper.create();
    } catch (error) {
      fallbackReason = String(error.message || error);
    }
  }
  if (!gpu && !manifest.fallback) throw new Error(`WebGPU is unavailable (${fallbackReason}) and this package has no CPU champion`);
  // Without WebGPU the GPU shards are not needed; the CPU champion (champion.onnx) is.
  const names = Object.keys(manifest.files).filter((name) => gpu ? name !== manifest.fallback?.onnx : !name.startsWith("champion-"));
  const total = names.reduce((sum, name) => sum + manifest.files[name].bytes, 0);
  let done = 0;
  const files = new Map();
  for (const name of names) {
    files.set(name, await modelFile(`./${site.model}`, name, manifest.files[name], (n) => { done += n; progress("model", done, total, name); }));
  }
  const shaders = new Map();
  for (const name of site.shaders) shaders.set(name, await (await fetchOk(`./vendor/shaders/${name}.wgsl`)).text());

  let draft = null;
  if (manifest.draft) draft = await DraftRunner.create(ort, files.get(manifest.draft.onnx), manifest.draft);
  let championRunner = null;
  if (!gpu) championRunner = await DraftRunner.create(ort, files.get(manifest.fallback.onnx), manifest.fallback);
  const browser = pyodide.pyimport("pyodide_app.browser");
  const limit = Math.min(context, manifest.generation.context_limit);
  const upload = (done, total) => progress("gpu", done, total, "uploading weights to the GPU");
  try {
    // The WebGPU champion uploads and warms up through run_sync (JSPI); the CPU one does no work here.
    engine = gpu ? await browser.create_engine.callPromising(manifestText, files, shaders, gpu, draft, kMax, limit, championRunner, upload)
      : browser.create_engine(manifestText, files, shaders, null, draft, kMax, limit, championRunner);
  } catch (error) {
    // An adapter below the champion's needs (limits, workgroup memory): run on the CPU instead, if we can.
    const reason = String(error.message || error).split("\n").filter(Boolean).pop();
    if (!gpu || !manifest.fallback || !reason.includes("GPUUnsupported")) throw new Error(reason);
    fallbackReason = reason;
    gpu = null;
    files.set(manifest.fallback.onnx, await modelFile(`./${site.model}`, manifest.fallback.onnx, manifest.files[manifest.fallback.onnx], () => {}));
    championRunner = await DraftRunner.create(ort, files.get(manifest.fallback.onnx), manifest.fallback);
    engine = browser.create_engine(manifestText, files, shaders, null, draft, kMax, limit, championRunner);
  }
  if (gpu) {
    gpu.device.lost.then((info) => {
      if (info.reason !== "destroyed") post({ type: "fatal", message: `The GPU device was lost (${info.message || info.reason}). Reload the page to start again; the conversation shown stays on screen.` });
    });
  }
  runChat = browser.run_chat;
  progress("gpu", 1, 1, "ready");
  post({
    type: "ready",
    info: {
      adapter: gpu ? gpu.adapterName : `WebGPU unusable (${fallbackReason}): champion on onnxruntime-web wasm, acceptance on the CPU`,
      backend: gpu ? "WebGPU" : "CPU fallback", draft: Boolean(draft), kMax,
      context: Math.min(context, manifest.generation.context_limit),
      model: manifest.source, champion: manifest.champion.config, draftKind: manifest.draft?.description ?? null,
    },
  });
}

async function chat({ id, request }) {
  state.cancelled = false;
  const emit = (eventJson) => post({ type: "event", id, event: JSON.parse(eventJson) });
  try {
    // run_chat is async (it awaits the onnxruntime-web runs); callPromising also lets the WebGPU
    // read-back block on JSPI where the browser has it.
    await (HAS_JSPI ? runChat.callPromising(engine, JSON.stringify(request), emit, state) : runChat(engine, JSON.stringify(request), emit, state));
  } catch (error) {
    post({ type: "event", id, event: { type: "rejected", code: "INTERNAL", message: String(error.message || error).split("\n").filter(Boolean).pop() } });
  }
  post({ type: "chat-end", id });
}

let queue = Promise.resolve();
self.onmessage = (message) => {
  const data = message.data;
  if (data.type === "stop") { state.cancelled = true; return; }  // handled while Python awaits the GPU
  queue = queue.then(async () => {
    try {
      if (data.type === "load") await load(data);
      else if (data.type === "chat") await chat(data);
    } catch (error) {
      post({ type: "fatal", message: String(error.message || error) });
    }
  });
};
