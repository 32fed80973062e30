// worker.js — module Web Worker: Pyodide + pyodide_app (the orchestrator), the WebGPU champion,
// the onnxruntime-web draft. Everything is fetched from this origin; model files are checked
// against the manifest's sha256 and kept in the Cache API for the next visit.
//
// main -> worker: {type: "load", kMax, context} | {type: "chat", id, request} | {type: "stop"}
//                 {type: "fit", id, messages, room} | {type: "selfTest", id}
//                 benchmarks: {type: "kernel", id, repeats} | {type: "peer", id, backend, request} | {type: "forget", id, keepKv}
// worker -> main: {type: "progress", phase, done, total} | {type: "ready", info} | {type: "fatal", message}
//                 {type: "event", id, event} | {type: "chat-end", id} | {type: "result", id, value | error}

import { GpuHelper } from "./gpu.js";
import { OnnxKVSession } from "./onnx_session.js";
import { externalWeights } from "./dequant.js";

const MODEL_CACHE = "spec-chat-model-v1";
const HAS_JSPI = typeof WebAssembly.Suspending === "function";  // absent in WebKit (no WebGPU path then)
const state = { cancelled: false };  // read by Python (pyodide_app.browser.JsCancel)
let pyodide = null;
let engine = null;
let runChat = null;
let ortWasm = null;   // the onnxruntime-web module (wasm build)
let manifest = null;
let site = null;
let modelUrl = null;  // the model package's folder URL: the load's modelBase, else the site's own
let cacheHits = 0;    // model files served from the Cache API during load (a warm load)
let readyInfo = null; // what the ready message said: the self-test's report names the device and backend
const peers = {};     // benchmark peers: backend -> {runner, session_s}
// Where a WebGPU step is faster than this, the CPU champion is not even timed: no wasm champion step has
// been measured below ~27 ms (SmolLM2's float32 graph, one wasm thread), and building it costs ~0.5 GB and seconds.
const CPU_PATH_FLOOR_MS = 25;

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
    } else {
      cacheHits += 1;
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
  ort.env.wasm.numThreads = 1;  // measured: 2 threads were slower than 1 for these graphs' small MatMuls
  progress("runtime", 3, 3, "ready");
  return ort;
}

// kernels: "auto" | "columns" | "split" (a URL override), or null to use kernelChoices, the page's remembered
// {"<adapter>|<champion weights hash>": family} from earlier loads, else time the families now ("auto").
// backend: "auto" (the faster champion on this device: timed at the first load, then remembered in
// backendChoices {"<adapter>|<champion weights hash>": "webgpu" | "cpu"}), "webgpu" or "cpu" (Settings).
// cpuFloorMs: the CPU_PATH_FLOOR_MS override (?cpu_floor_ms=, tests: 0 times the CPU champion on any device).
// backendFrom: "url" or "settings", where a non-auto backend came from (said in the reason shown).
async function load({ kMax, context, kernels = null, kernelChoices = {}, backend = "auto", backendChoices = {}, cpuFloorMs = null,
                      backendFrom = "settings", modelBase = null }) {
  const chosenBy = backendFrom === "url" ? "set in the page address" : "chosen in Settings";
  const started = performance.now();
  const seconds = (since) => (performance.now() - since) / 1000;
  const timing = {};  // seconds per phase, reported in the ready message
  site = await (await fetchOk("./vendor/site.json")).json();
  modelUrl = modelBase ? new URL(modelBase, self.location.href).href : `./${site.model}`;
  const ort = ortWasm = await loadRuntime(site);
  timing.runtime_s = seconds(started);
  const manifestText = await (await fetchOk(`${modelUrl}manifest.json`)).text();
  manifest = JSON.parse(manifestText);
  const checkManifest = pyodide.pyimport("pyodide_app.manifest").check_manifest;
  try {
    checkManifest(pyodide.pyimport("json").loads(manifestText));  // JSON null -> None (toPy would give jsnull)
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
  if (!gpu && !manifest.fallback && !manifest.cpu_champion) throw new Error(`WebGPU is unavailable (${fallbackReason}) and this package has no CPU champion`);
  const deviceKey = gpu ? `${gpu.adapterName}|${manifest.identity.champion_weights}` : null;
  const hasCpuChampion = Boolean(manifest.fallback || manifest.cpu_champion);
  const remembered = gpu && backend === "auto" ? backendChoices[deviceKey] : null;
  const choice = { asked: backend, measured: null, why: null };  // reported in the ready message
  if (gpu && hasCpuChampion && (backend === "cpu" || remembered === "cpu")) {
    choice.why = backend === "cpu" ? chosenBy : "faster than WebGPU on this device (measured at an earlier load)";
    fallbackReason = choice.why;
    gpu.device.destroy();
    gpu = null;
  } else if (gpu && remembered === "webgpu") {
    choice.why = "faster than the CPU champion on this device (measured at an earlier load)";
  }
  // The WebGPU path and the float32 CPU champion both build on the champion shards; only the compact CPU
  // champion (champion.onnx) needs its own file, fetched when it is the one that runs.
  const names = Object.keys(manifest.files).filter((name) => name !== manifest.fallback?.onnx &&
    (gpu || manifest.cpu_champion || !name.startsWith("champion-")));
  const total = names.reduce((sum, name) => sum + manifest.files[name].bytes, 0);
  let done = 0;
  const files = new Map();
  for (const name of names) {
    files.set(name, await modelFile(modelUrl, name, manifest.files[name], (n) => { done += n; progress("model", done, total, name); }));
  }
  timing.model_s = seconds(started) - timing.runtime_s;
  timing.model_files_from_cache = cacheHits;
  timing.model_files = names.length;
  const shaders = new Map();
  for (const name of site.shaders) shaders.set(name, await (await fetchOk(`./vendor/shaders/${name}.wgsl`)).text());

  let draft = null;
  const draftStarted = performance.now();
  if (manifest.draft) draft = await OnnxKVSession.create(ort, files.get(manifest.draft.onnx), manifest.draft);
  timing.draft_session_s = seconds(draftStarted);
  const engineStarted = performance.now();
  let cpu = null;  // {runner, entry: "cpu_champion" | "fallback", notice}
  if (!gpu) cpu = await cpuChampion(ort, files);
  const browser = pyodide.pyimport("pyodide_app.browser");
  const engineModule = pyodide.pyimport("pyodide_app.engine");  // PROPOSERS, NEEDS_DRAFT
  const limit = Math.min(context, manifest.generation.context_limit);
  const upload = (done, total) => progress("gpu", done, total, "uploading weights to the GPU");
  const kernelChoice = kernels || (gpu && kernelChoices[deviceKey]) || "auto";
  try {
    // The WebGPU champion uploads, warms up and (kernels "auto") times its kernel families through run_sync
    // (JSPI); the CPU one does no work here.
    engine = gpu ? await browser.create_engine.callPromising(manifestText, files, shaders, gpu, draft, kMax, limit, null, upload,
      "fallback", kernelChoice)
      : browser.create_engine(manifestText, files, shaders, null, draft, kMax, limit, cpu.runner, null, cpu.entry);
  } catch (error) {
    // An adapter below the champion's needs (limits, workgroup memory): run on the CPU instead, if we can.
    const reason = String(error.message || error).split("\n").filter(Boolean).pop();
    if (!gpu || !(manifest.fallback || manifest.cpu_champion) || error.type !== "GPUUnsupported") throw new Error(reason);
    fallbackReason = reason;
    gpu = null;
    cpu = await cpuChampion(ort, files);
    engine = browser.create_engine(manifestText, files, shaders, null, draft, kMax, limit, cpu.runner, null, cpu.entry);
  }
  if (gpu && backend === "auto" && !remembered && manifest.cpu_champion) {
    const faster = await fasterChampion(ort, files, shaders, draft, kMax, limit, cpuFloorMs ?? CPU_PATH_FLOOR_MS);
    choice.measured = faster.measured;
    choice.why = faster.why;
    if (faster.cpu) {
      engine = faster.engine;
      cpu = faster.cpu;
      fallbackReason = faster.why;
      gpu.device.destroy();
      gpu = null;
    }
  } else if (gpu && backend === "webgpu") {
    choice.why = chosenBy;
  }
  if (gpu) {
    gpu.device.lost.then((info) => {
      if (info.reason !== "destroyed") post({ type: "fatal", message: `The GPU device was lost (${info.message || info.reason}). Reload the page to start again; the conversation shown stays on screen.` });
    });
  }
  runChat = browser.run_chat;
  const kernelReport = JSON.parse(browser.kernel_report(engine));  // null on the CPU path
  timing.engine_s = seconds(engineStarted);  // GPU upload + pipeline compilation + warm-up (or CPU champion set-up)
  timing.total_s = seconds(started);
  progress("gpu", 1, 1, "ready");
  readyInfo = {
    adapter: gpu ? gpu.adapterName : `${choice.why && deviceKey ? `chosen: ${choice.why}` : `WebGPU unusable (${fallbackReason})`}: champion on onnxruntime-web wasm` +
      `${cpu.entry === "fallback" ? " (compact" + (cpu.notice ? `: ${cpu.notice}` : "") + ")" : " (float32)"}, acceptance on the CPU`,
    backend: gpu ? "WebGPU" : deviceKey ? "CPU" : "CPU fallback", cpuChampion: cpu?.entry ?? null, draft: Boolean(draft), kMax,
    kernels: kernelReport && { ...kernelReport, key: deviceKey, chosen: kernelChoice === "auto" ? "timed at load" : kernels ? "set in the URL" : "remembered" },
    choice: { ...choice, key: deviceKey, runs: gpu ? "webgpu" : "cpu" },
    context: Math.min(context, manifest.generation.context_limit),
    limits: { kMax, context: limit, minTemperature: pyodide.pyimport("pyodide_app.processors").MIN_TEMPERATURE,
              vocab: manifest.champion.config.vocab_size },
    files: Object.fromEntries(Object.entries(manifest.files).map(([name, f]) => [name, f.bytes])),
    quantisation: [...new Set(Object.values(manifest.champion.tensors).map((t) => t.format))].sort(),
    license: manifest.license ?? null,
    model: manifest.source, champion: manifest.champion.config, draftKind: manifest.draft?.description ?? null,
    load: timing, memory: engine.memory_report().toJs({ dict_converter: Object.fromEntries }),
    proposers: { all: engineModule.PROPOSERS.toJs(), need_draft: engineModule.NEEDS_DRAFT.toJs() },
  };
  readyInfo.selfTestKey = `${readyInfo.backend}|${deviceKey ?? manifest.identity.champion_weights}`;  // its reports are kept per key
  post({ type: "ready", info: readyInfo });
}

// At a first load on a device with both paths: one greedy step of the loaded WebGPU champion against one of
// the CPU champion (float32 graph), WebGPU timed before and after the CPU (the better of the two counts).
// Returns {cpu, engine} when the CPU one is faster (it replaces the WebGPU engine), else {} after releasing
// the CPU trial; both with the measurement and the reason in words.
async function fasterChampion(ort, files, shaders, draft, kMax, limit, cpuFloorMs) {
  const bench = pyodide.pyimport("pyodide_app.kernel_bench");
  const webgpuMs = await bench.decode_step_ms.callPromising(engine.champion, 2);
  const measured = { webgpu_ms: webgpuMs, cpu_ms: null };
  if (webgpuMs <= cpuFloorMs) return { measured, why: `WebGPU step ${webgpuMs.toFixed(0)} ms: faster than any CPU champion` };
  progress("gpu", 0, 1, "timing the CPU champion against WebGPU");
  const trial = await cpuChampion(ort, files);
  measured.cpu_ms = await cpuStepMs(trial.runner, 2);
  // WebGPU again after the CPU: its first timing follows the weight upload at once, when the browser can still
  // be busy (a Firefox bench run timed it at 83 ms there, the page's later calls at 60 ms, and chose the CPU).
  measured.webgpu_ms = Math.min(webgpuMs, await bench.decode_step_ms.callPromising(engine.champion, 2));
  const words = `WebGPU ${measured.webgpu_ms.toFixed(0)} ms vs CPU ${measured.cpu_ms.toFixed(0)} ms per token, measured at this first load`;
  if (measured.cpu_ms >= measured.webgpu_ms) {
    await trial.runner.release();
    return { measured, why: `faster than the CPU champion (${words})` };
  }
  const browser = pyodide.pyimport("pyodide_app.browser");
  const cpuEngine = browser.create_engine(JSON.stringify(manifest), files, shaders, null, draft, kMax, limit, trial.runner, null, trial.entry);
  return { measured, why: `the CPU champion is faster on this device (${words})`, cpu: trial, engine: cpuEngine };
}

// Best-of-`repeats` milliseconds of one CPU champion decode step after a 32-token prompt.
async function cpuStepMs(runner, repeats) {
  runner.reset();
  let token = (await runner.step(Array.from({ length: 32 }, (_, i) => 100 + i), 0, 1)).token;
  let best = Infinity;
  for (let i = 0; i <= repeats; i++) {  // the first step warms up
    const began = performance.now();
    token = (await runner.step([token], 0, 1)).token;
    if (i) best = Math.min(best, performance.now() - began);
  }
  runner.reset();
  return best;
}

// The CPU champion: the float32 graph with its weights dequantised from the champion shards (fast, ~4 bytes
// per weight in memory), or, where that fails (memory) or the package has none, the compact champion.onnx.
async function cpuChampion(ort, files) {
  let notice = null;
  if (manifest.cpu_champion) {
    try {
      progress("gpu", 0, 1, "building the CPU champion's float32 weights");
      const external = externalWeights(files, manifest, manifest.cpu_champion);
      const runner = await OnnxKVSession.create(ort, files.get(manifest.cpu_champion.onnx), manifest.cpu_champion, ["wasm"], external);
      return { runner, entry: "cpu_champion", notice };
    } catch (error) {
      notice = `the float32 champion did not fit (${String(error.message || error).split("\n")[0]})`;
    }
  }
  if (!manifest.fallback) throw new Error(notice || "this package has no CPU champion");
  const name = manifest.fallback.onnx;
  if (!files.has(name)) files.set(name, await modelFile(modelUrl, name, manifest.files[name], () => {}));
  return { runner: await OnnxKVSession.create(ort, files.get(name), manifest.fallback), entry: "fallback", notice };
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

// ---- benchmarks (build_tools bench) -------------------------------------------------------------------
async function kernel({ repeats }) {
  const bench = pyodide.pyimport("pyodide_app.kernel_bench");
  const times = await bench.verify_sweep.callPromising(engine.champion, repeats);
  return bench.sweep_summary(times).toJs({ dict_converter: Object.fromEntries });
}

// Milliseconds per forward by kernel kind at T = rows (kernel_bench.profile_by_kind; WebGPU champion only).
async function profile({ rows, repeats }) {
  const bench = pyodide.pyimport("pyodide_app.kernel_bench");
  const result = await bench.profile_by_kind.callPromising(engine.champion, rows, repeats);
  return result.toJs({ dict_converter: Object.fromEntries });
}

// The peer users would otherwise pick: the same champion (champion.onnx) decoded greedily on
// onnxruntime-web alone, wasm or WebGPU execution provider, one token per run; on WebGPU the KV cache
// stays on the GPU between runs (OnnxKVSession).
async function peerRunner(backend) {
  if (!peers[backend]) {
    const started = performance.now();
    let ort = ortWasm;
    if (backend === "webgpu") {
      ort = await import("./vendor/ort-webgpu/ort.webgpu.min.mjs");
      ort.env.wasm.wasmPaths = new URL("./vendor/ort-webgpu/", self.location.href).href;
      ort.env.wasm.numThreads = 1;
    }
    const name = manifest.fallback.onnx;
    const bytes = await modelFile(modelUrl, name, manifest.files[name], () => {});
    const runner = await OnnxKVSession.create(ort, bytes, manifest.fallback, [backend]);
    peers[backend] = { runner, session_s: (performance.now() - started) / 1000 };
  }
  return peers[backend];
}

async function peer({ backend, request }) {
  const { runner, session_s } = await peerRunner(backend);
  const prompt = engine.encode_prompt(pyodide.toPy(request.messages)).toJs();
  const eos = new Set(manifest.generation.eos_ids);
  const limit = Math.min(request.max_tokens, engine.champion.context_limit - prompt.length);
  runner.reset();
  const started = performance.now();
  let result = await runner.step(prompt, 0, 1);  // prefill + the first token (argmax at temperature 0)
  const firstAt = performance.now();
  const tokens = [result.token];
  while (tokens.length < limit && !eos.has(tokens[tokens.length - 1])) {
    result = await runner.step([tokens[tokens.length - 1]], 0, 1);
    tokens.push(result.token);
  }
  const done = performance.now();
  return { tokens, prompt_tokens: prompt.length, ttft_s: (firstAt - started) / 1000, decode_s: (done - firstAt) / 1000,
           total_s: (done - started) / 1000, session_s };
}

// How much of a conversation fits with `room` tokens left for the answer (Engine.fit_conversation):
// the composer's token count and the page's dropping of old turns.
async function fit({ messages, room }) {
  return engine.fit_conversation(pyodide.toPy(messages), room).toJs({ dict_converter: Object.fromEntries });
}

// "Is it exact on this device?": the self-test (pyodide_app/self_test.py) on the champion in use, with the
// device it ran on. {passed, checks: [{name, passed, detail, seconds}], seconds, adapter, backend, kernel_variant,
// cpu_champion, key, at}.
async function selfTest() {
  const browser = pyodide.pyimport("pyodide_app.browser");
  const report = JSON.parse(await (HAS_JSPI ? browser.self_test.callPromising(engine) : browser.self_test(engine)));
  return { ...report, adapter: readyInfo.adapter, backend: readyInfo.backend, kernel_variant: readyInfo.kernels?.family ?? null,
           cpu_champion: readyInfo.cpuChampion, key: readyInfo.selfTestKey, at: new Date().toISOString() };
}

// Calls the page (fit, selfTest) and the bench (window.specChat) make; each answers with one result message.
const CALLS = { fit, selfTest, kernel, profile, peer, forget: async ({ keepKv }) => { engine.forget_context(Boolean(keepKv)); return true; } };

let queue = Promise.resolve();
self.onmessage = (message) => {
  const data = message.data;
  if (data.type === "stop") { state.cancelled = true; return; }  // handled while Python awaits the GPU
  queue = queue.then(async () => {
    try {
      if (data.type === "load") await load(data);
      else if (data.type === "chat") await chat(data);
      else if (Object.hasOwn(CALLS, data.type)) {
        try {
          const work = CALLS[data.type];
          post({ type: "result", id: data.id, value: await work(data) });
        } catch (error) {
          post({ type: "result", id: data.id, error: String(error.message || error).split("\n").filter(Boolean).pop() });
        }
      }
    } catch (error) {
      post({ type: "fatal", message: String(error.message || error) });
    }
  });
};
