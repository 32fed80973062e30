// onnx_session.js — one ONNX graph of the package with its KV cache on onnxruntime-web: the draft, and
// without WebGPU the CPU champion (champion_cpu.onnx or champion.onnx); the bench's onnxruntime-web peers too.
// The browser twin of pyodide_app/native/onnx_session.py; pyodide_app/browser/onnx_session.py drives it.
// step() feeds tokens after the cached ones and returns the graph's sampled token, its q row (a
// Float32Array that goes to the GPU without passing through Python lists), the row's entropy and, for
// champions, the logits of every fed row with each row's argmax and a processor of a sampled row beside them
// (row_processing.js: a greedy round reads no row, a sampled one no full row).

import { processedRow, rowArgmax } from "./row_processing.js";

export class OnnxKVSession {
  // externalData: [{path, data}] for a graph whose weights are not in its file (the float32 CPU champion).
  // On the WebGPU execution provider the KV cache stays on the GPU between steps (present_* outputs bound as
  // GPU buffers and fed back as past_*), as Transformers.js users run it; elsewhere it lives in host arrays.
  static async create(ort, modelBytes, entry, executionProviders = ["wasm"], externalData = undefined) {
    const kvOnDevice = executionProviders.includes("webgpu");
    const options = { executionProviders, graphOptimizationLevel: "all", ...(externalData ? { externalData } : {}) };
    if (kvOnDevice) {
      const names = [];
      for (let i = 0; i < entry.config.n_layers; i++) names.push(`present_key_${i}`, `present_value_${i}`);
      options.preferredOutputLocation = Object.fromEntries(names.map((name) => [name, "gpu-buffer"]));
    }
    const session = await ort.InferenceSession.create(modelBytes, options);
    return new OnnxKVSession(ort, session, entry, kvOnDevice);
  }

  constructor(ort, session, entry, kvOnDevice = false) {
    this.ort = ort;
    this.session = session;
    this.kvOnDevice = kvOnDevice;
    const c = entry.config;
    this.layers = c.n_layers;
    this.kvHeads = c.n_kv_heads;
    this.headDim = c.head_dim;
    this.past = {};
    this.reset();
  }

  reset() {
    for (const { device } of Object.values(this.past)) device?.dispose();
    this.past = {};
    for (let i = 0; i < this.layers; i++) {
      for (const kind of ["key", "value"]) {
        this.past[`past_${kind}_${i}`] = { data: new Float32Array(0), length: 0 };
      }
    }
    this.length = 0;
  }

  // Keep the first `length` cached rows (logical rollback: the arrays are sliced on the next step).
  truncate(length) {
    if (this.kvOnDevice && length < this.length) throw new Error("a GPU-resident KV cache cannot be rolled back");
    this.length = Math.min(this.length, length);
  }

  tensor(name) {
    if (this.past[name].device) return this.past[name].device;  // [1, heads, length, dim] on the GPU
    const { data } = this.past[name];
    const rowFloats = this.headDim;
    const full = data.length / (this.kvHeads * rowFloats);  // rows held per head
    if (full === this.length) return new this.ort.Tensor("float32", data, [1, this.kvHeads, this.length, this.headDim]);
    // [1, heads, rows, dim]: move each head's kept rows down within the array this cache alone holds (head 0's
    // are in place), no new array: after a rejection at 1,700 tokens a fresh copy of 60 such caches allocated
    // 78 MB a call (Node: 16-21 ms against 4 ms in place).
    for (let h = 1; h < this.kvHeads; h++) {
      data.copyWithin(h * this.length * rowFloats, h * full * rowFloats, (h * full + this.length) * rowFloats);
    }
    const kept = data.subarray(0, this.kvHeads * this.length * rowFloats);
    this.past[name] = { data: kept };
    return new this.ort.Tensor("float32", kept, [1, this.kvHeads, this.length, this.headDim]);
  }

  async step(tokens, temperature, uniform) {
    const feeds = {
      input_ids: new this.ort.Tensor("int64", BigInt64Array.from(tokens, (t) => BigInt(t)), [1, tokens.length]),
      temperature: new this.ort.Tensor("float32", Float32Array.of(temperature), [1]),
      uniform: new this.ort.Tensor("float32", Float32Array.of(uniform), [1]),
    };
    for (const name of Object.keys(this.past)) feeds[name] = this.tensor(name);
    const out = await this.session.run(feeds);
    for (const name of Object.keys(this.past)) {
      const present = out[name.replace("past", "present")];
      this.past[name].device?.dispose();  // fed to this step; its successor holds the rows now
      this.past[name] = this.kvOnDevice ? { device: present } : { data: present.data };
    }
    this.length += tokens.length;
    const logits = out.all_logits;  // champions: [1, T, V]
    const width = logits?.dims[2];
    return {
      token: Number(out.token.data[0]),
      probs: out.probs.data,
      entropyBits: out.entropy_bits?.data[0] ?? null,  // bits, of softmax(logits / T) (T = 1 when greedy)
      rows: logits?.data ?? null,
      best: logits ? rowArgmax(logits.data, width) : null,
      // (row, temperature, topK, topP) -> that row's processed distribution (row_processing.js), or null
      processed: logits ? (row, temperature, topK, topP) => processedRow(logits.data, row, width, temperature, topK, topP) : null,
    };
  }

  // Frees the session's memory now (a CPU champion timed and not chosen).
  async release() {
    await this.session.release();
  }
}
