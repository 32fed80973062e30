// Times one SmolLM2 forward's 210 layer matmuls (30 layers x q, k, v, o, gate, up, down; the LM head is
// left out) with each kernel of matvec.wasm, at T = 1 and 5 rows, best of --repeats, one thread.
//   node scripts/wasm_kernels/bench_matvec.mjs build/matvec.wasm [repeats | check]
import { readFileSync } from "node:fs";

const [wasmPath, repeatsArg] = process.argv.slice(2);
const repeats = Number(repeatsArg || 5);
const D = 576, FFN = 1536, KV = 192, LAYERS = 30, TMAX = 5;
const SHAPES = [[D, D], [KV, D], [KV, D], [D, D], [FFN, D], [FFN, D], [D, FFN]];  // [n out, k in]

let q4Bytes = 0, denseFloats = 0;
for (const [n, k] of SHAPES) { q4Bytes += n * (k / 32) * 20; denseFloats += n * k; }
q4Bytes *= LAYERS; denseFloats *= LAYERS;
const pages = Math.ceil((q4Bytes + denseFloats * 4 + 8 * TMAX * FFN * 4 + (4 << 20)) / 65536);
const memory = new WebAssembly.Memory({ initial: pages });
const { instance } = await WebAssembly.instantiate(readFileSync(wasmPath), { env: { memory } });
const k = instance.exports;

let top = 1 << 21;  // above the C stack (1 MiB from address 0 in a zig cc build)
const alloc = (bytes) => { const at = top; top += Math.ceil(bytes / 16) * 16; return at; };
const q4 = alloc(q4Bytes), dense = alloc(denseFloats * 4);
const x = alloc(TMAX * FFN * 4), xsum = alloc(TMAX * (FFN / 32) * 4), y = alloc(TMAX * FFN * 4);
const bytes = new Uint8Array(memory.buffer);
for (let i = 0; i < q4Bytes; i++) bytes[q4 + i] = (i * 2654435761) >>> 24;
for (let b = q4; b < q4 + q4Bytes; b += 20) { bytes.set([0x00, 0x24, 0x00, 0xa4], b); }  // d = 0.0156, m = -0.0156
const floats = new Float32Array(memory.buffer);
for (let i = 0; i < denseFloats; i++) floats[dense / 4 + i] = ((i * 7919) % 255 - 127) / 4096;
for (let i = 0; i < TMAX * FFN; i++) floats[x / 4 + i] = ((i * 31) % 97 - 48) / 64;

// Correctness first, on a small matrix: every kernel against float64 over the exact weights d*q + m, and
// row 0 of a 5-row call bitwise equal to the same row alone (batch invariance).
function halfBits(v) {  // a normal f16 near v (values chosen exactly representable)
  const f = new Float32Array([v]), u = new Uint32Array(f.buffer)[0];
  return ((u >>> 16) & 0x8000) | ((((u >>> 23) & 0xff) - 112) << 10) | ((u >>> 13) & 0x3ff);
}
function check() {
  const n = 8, kk = 64, T = 5, blocks = kk / 32;
  const w = alloc(n * blocks * 20), xs = alloc(T * kk * 4), sums = alloc(T * blocks * 4);
  const outs = { dense: alloc(T * n * 4), q4_1: alloc(T * n * 4), q4_1_factored: alloc(T * n * 4) };
  const dw = alloc(n * kk * 4), exact = new Float64Array(n * kk), row0 = {};
  const b8 = new Uint8Array(memory.buffer), f32 = new Float32Array(memory.buffer);
  for (let j = 0; j < n; j++) for (let b = 0; b < blocks; b++) {
    const at = w + (j * blocks + b) * 20, d = (j + 1) / 256, m = -(b + 1) / 64;
    const hd = halfBits(d), hm = halfBits(m);
    b8.set([hd & 255, hd >> 8, hm & 255, hm >> 8], at);
    for (let e = 0; e < 16; e++) b8[at + 4 + e] = ((j * 7 + e * 3 + b) % 16) | (((j + e * 5 + b * 3) % 16) << 4);
    for (let e = 0; e < 32; e++) {
      const q = e < 16 ? b8[at + 4 + e] & 15 : b8[at + 4 + e - 16] >> 4;
      exact[j * kk + b * 32 + e] = Math.fround(d * q + m);
      f32[dw / 4 + j * kk + b * 32 + e] = exact[j * kk + b * 32 + e];
    }
  }
  for (let i = 0; i < T * kk; i++) f32[xs / 4 + i] = Math.fround(Math.sin(i * 0.37) * 2);
  for (let t = 0; t < T; t++) for (let b = 0; b < blocks; b++) {
    let s = 0; for (let e = 0; e < 32; e++) s = Math.fround(s + f32[xs / 4 + t * kk + b * 32 + e]);
    f32[sums / 4 + t * blocks + b] = s;
  }
  for (const rows of [T, 1]) {
    k.dense_matvec(dw, xs, outs.dense, n, kk, rows);
    k.q4_1_matvec(w, xs, outs.q4_1, n, kk, rows);
    k.q4_1_matvec_factored(w, xs, sums, outs.q4_1_factored, n, kk, rows);
    for (const [name, out] of Object.entries(outs)) {
      for (let t = 0; t < rows; t++) for (let j = 0; j < n; j++) {
        let ref = 0, mag = 0;
        for (let i = 0; i < kk; i++) { ref += exact[j * kk + i] * f32[xs / 4 + t * kk + i]; mag += Math.abs(exact[j * kk + i] * f32[xs / 4 + t * kk + i]); }
        const got = f32[out / 4 + t * n + j];
        if (!(Math.abs(got - ref) <= 1e-6 * mag)) throw new Error(`${name} T=${rows} row ${t} col ${j}: ${got} vs ${ref}`);
      }
      if (rows === T) row0[name] = Array.from(f32.subarray(out / 4, out / 4 + n));
      else if (row0[name].some((v, j) => v !== f32[out / 4 + j])) throw new Error(`${name}: row 0 differs alone`);
    }
  }
  console.log("kernels agree with float64 (within 1e-6 of sum |w x|) and row 0 is bitwise the same alone and in 5 rows");
}
check();
if (repeatsArg === "check") process.exit(0);

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
