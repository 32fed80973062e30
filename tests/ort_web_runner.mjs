// Runs an ONNX graph in onnxruntime-web (wasm backend, under Node), once per entry of `runs`.
// stdin JSON: {model, feeds: {name: {type, dims, data}}, runs: [{name: number}], outputs: [name]}
//   feeds: the inputs shared by every run (type "float32" | "int64"); each run overrides some of them
//   with one-element float32 tensors [1] (temperature, uniform).
// stdout JSON: [{output name: flat array}] per run; with `outputs_once`, those outputs are kept only
//   for the first run (large rows that do not change between runs).
import * as ort from "onnxruntime-web/wasm";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";

const request = JSON.parse(readFileSync(0, "utf8"));
const require = createRequire(import.meta.url);
ort.env.wasm.numThreads = 1;
ort.env.wasm.wasmPaths = dirname(require.resolve("onnxruntime-web/wasm")) + "/";
const session = await ort.InferenceSession.create(readFileSync(request.model), { executionProviders: ["wasm"] });

function tensor({ type, dims, data }) {
  const values = type === "int64" ? BigInt64Array.from(data.map(BigInt)) : Float32Array.from(data);
  return new ort.Tensor(type, values, dims);
}

const shared = Object.fromEntries(Object.entries(request.feeds).map(([name, spec]) => [name, tensor(spec)]));
const once = new Set(request.outputs_once ?? []);
const results = [];
for (const [index, run] of (request.runs ?? [{}]).entries()) {
  const feeds = { ...shared };
  for (const [name, value] of Object.entries(run)) feeds[name] = new ort.Tensor("float32", Float32Array.of(value), [1]);
  const out = await session.run(feeds);
  const record = {};
  for (const name of request.outputs) {
    if (once.has(name) && index > 0) continue;
    record[name] = Array.from(out[name].data, Number);
  }
  results.push(record);
}
process.stdout.write(JSON.stringify(results));
