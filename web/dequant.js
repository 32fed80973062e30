// dequant.js — GGUF blocks -> float32, in GGUF row order: the CPU champion's weights, built in the worker
// from the same champion shards the WebGPU path uploads (the twin of pyodide_app/native/dense_champion.py).
// Q4_1 block (20 bytes): d f16, m f16, 16 bytes; element j = low nibble of byte j, j+16 = its high nibble;
// value d*q + m. Q8_0 block (34 bytes): d f16, 32 int8; value d*q. float32 arithmetic (Math.fround).

const BLOCK = 32;
let half = null;  // f16 bits -> float32 value, 65,536 entries, built on first use

function halfTable() {
  if (half) return half;
  half = new Float32Array(65536);
  for (let bits = 0; bits < 65536; bits++) {
    const sign = bits & 0x8000 ? -1 : 1;
    const exponent = (bits >> 10) & 0x1f;
    const mantissa = bits & 0x3ff;
    half[bits] = exponent === 0 ? sign * mantissa * 2 ** -24
      : exponent === 31 ? (mantissa ? NaN : sign * Infinity)
      : sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
  }
  return half;
}

// A tensor's bytes: its parts (byte ranges of shards, in order) concatenated.
export function tensorBytes(files, entry) {
  const total = entry.parts.reduce((sum, part) => sum + part.bytes, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of entry.parts) {
    const shard = files.get(part.shard);
    out.set(shard.subarray(part.offset, part.offset + part.bytes), at);
    at += part.bytes;
  }
  return out;
}

// entry: {format, shape (GGUF order: shape[0] = columns)} -> Float32Array [rows * columns].
export function dequantize(bytes, entry) {
  const count = entry.shape.reduce((a, b) => a * b, 1);
  if (entry.format === "f32") return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + count * 4));
  const table = halfTable();
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(count);
  const size = entry.format === "q4_1" ? 20 : entry.format === "q8_0" ? 34 : 0;
  if (!size) throw new Error(`unknown tensor format ${entry.format}`);
  for (let block = 0, at = 0; block < count / BLOCK; block++, at += size) {
    const d = table[view.getUint16(at, true)];
    const base = block * BLOCK;
    if (size === 20) {
      const m = table[view.getUint16(at + 2, true)];
      for (let j = 0; j < 16; j++) {
        const byte = bytes[at + 4 + j];
        out[base + j] = Math.fround(Math.fround(d * (byte & 15)) + m);
        out[base + j + 16] = Math.fround(Math.fround(d * (byte >> 4)) + m);
      }
    } else {
      for (let j = 0; j < 32; j++) out[base + j] = Math.fround(d * view.getInt8(at + 2 + j));
    }
  }
  return out;
}

// ORT external data for a weightless graph: one entry per initializer, named by its GGUF tensor.
export function externalWeights(files, manifest, entry) {
  return Object.values(entry.external_weights).map((tensor) => {
    const spec = manifest.champion.tensors[tensor];
    const values = dequantize(tensorBytes(files, spec), spec);
    return { path: tensor, data: new Uint8Array(values.buffer) };
  });
}
