// Times one SmolLM2 forward's 210 layer matmuls (30 layers x q, k, v, o, gate, up, down; the LM head is
// left out) with each kernel of matvec.wasm, at T = 1 and 5 rows, best of --repeats, one thread.
//   node scripts/wasm_kernels/bench_matvec.mjs build/matvec.wasm [repeats]
import { readFileSync } from "node:fs";

const [wasmPath, repeatsArg] = process.argv.slice(2);
const repeats = Number(repeatsArg || 5);
const D = 576, FFN = 1536, KV = 192, LAYERS = 30, TMAX = 5;
const SHAPES = [[D, D], [KV, D], [KV, D], [D, D], [FFN, D], [FFN, D], [D, FFN]];  // [n out, k in]

let q4Bytes = 0, denseFloats = 0;
for (const [n, k] of SHAPES) { q4Bytes += n * (k / 32) * 20; denseFloats += n * k; }
q4Bytes *= LAYERS; denseFloats *= LAYERS;
const pages = Math.ceil((q4Bytes + denseFloats * 4 + 8 * TMAX * FFN * 4 + (1 << 20)) / 65536);
const memory = new WebAssembly.Memory({ initial: pages });
const { instance } = await WebAssembly.instantiate(readFileSync(wasmPath), { env: { memory } });
const k = instance.exports;

let top = 1 << 16;
const alloc = (bytes) => { const at = top; top += Math.ceil(bytes / 16) * 16; return at; };
const q4 = alloc(q4Bytes), dense = alloc(denseFloats * 4);
const x = alloc(TMAX * FFN * 4), xsum = alloc(TMAX * (FFN / 32) * 4), y = alloc(TMAX * FFN * 4);
const bytes = new Uint8Array(memory.buffer);
for (let i = 0; i < q4Bytes; i++) bytes[q4 + i] = (i * 2654435761) >>> 24;
for (let b = q4; b < q4 + q4Bytes; b += 20) { bytes.set([0x00, 0x24, 0x00, 0xa4], b); }  // d = 0.0156, m = -0.0156
const floats = new Float32Array(memory.buffer);
for (let i = 0; i < denseFloats; i++) floats[dense / 4 + i] = ((i * 7919) % 255 - 127) / 4096;
for (let i = 0; i < TMAX * FFN; i++) floats[x / 4 + i] = ((i * 31) % 97 - 48) / 64;

function forward(kind, T) {
  let wq = q4, wd = dense;
  for (let layer = 0; layer < LAYERS; layer++) {
    for (const [n, kk] of SHAPES) {
      if (kind === "dense") k.dense_matvec(wd, x, y, n, kk, T);
      else if (kind === "q4_1") k.q4_1_matvec(wq, x, y, n, kk, T);
      else k.q4_1_matvec_factored(wq, x, xsum, y, n, kk, T);
      wq += n * (kk / 32) * 20; wd += n * kk * 4;
    }
  }
}
const result = {};
for (const T of [1, 5]) {
  for (const kind of ["dense", "q4_1", "q4_1_factored"]) result[`${kind} T=${T}`] = Infinity;
  for (let r = 0; r <= repeats; r++) {
    for (const kind of ["dense", "q4_1", "q4_1_factored"]) {  // interleaved: the machine is shared
      const began = performance.now();
      forward(kind, T);
      const ms = performance.now() - began;
      if (r) result[`${kind} T=${T}`] = Math.min(result[`${kind} T=${T}`], ms);
    }
  }
}
for (const [name, ms] of Object.entries(result)) console.log(`${name}: ${ms.toFixed(1)} ms`);
