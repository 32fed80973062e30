// Runs a draft ONNX graph once in onnxruntime-web (wasm backend, under Node).
// stdin JSON: {model, tokens, temperature, uniform, layers, kv_heads, head_dim}
// stdout JSON: {logits: [...], token}
import * as ort from "onnxruntime-web/wasm";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";

const request = JSON.parse(readFileSync(0, "utf8"));
const require = createRequire(import.meta.url);
ort.env.wasm.numThreads = 1;
ort.env.wasm.wasmPaths = dirname(require.resolve("onnxruntime-web/wasm")) + "/";
const session = await ort.InferenceSession.create(readFileSync(request.model), { executionProviders: ["wasm"] });
const feeds = {
  input_ids: new ort.Tensor("int64", BigInt64Array.from(request.tokens.map(BigInt)), [1, request.tokens.length]),
  temperature: new ort.Tensor("float32", Float32Array.of(request.temperature), [1]),
  uniform: new ort.Tensor("float32", Float32Array.of(request.uniform), [1]),
};
for (let i = 0; i < request.layers; i++) {
  for (const kind of ["key", "value"]) {
    feeds[`past_${kind}_${i}`] = new ort.Tensor("float32", new Float32Array(0), [1, request.kv_heads, 0, request.head_dim]);
  }
}
const out = await session.run(feeds);
process.stdout.write(JSON.stringify({ logits: Array.from(out.logits.data), token: Number(out.token.data[0]) }));
