// gpu.js — the browser binding of pyodide_app's GPUDevice interface (see pyodide_app/gpu.py), on navigator.gpu.
// Python calls these methods through Pyodide's FFI. A dispatch plan is registered once and replayed by
// one submitPlan() call per forward, so a round costs a handful of FFI calls, not one per dispatch.

const LIMIT_NAMES = {
  "max-storage-buffer-binding-size": "maxStorageBufferBindingSize",
  "max-storage-buffers-per-shader-stage": "maxStorageBuffersPerShaderStage",
  "max-compute-invocations-per-workgroup": "maxComputeInvocationsPerWorkgroup",
  "max-compute-workgroup-storage-size": "maxComputeWorkgroupStorageSize",
  "max-compute-workgroups-per-dimension": "maxComputeWorkgroupsPerDimension",
  "max-uniform-buffers-per-shader-stage": "maxUniformBuffersPerShaderStage",
  "max-uniform-buffer-binding-size": "maxUniformBufferBindingSize",
  "max-buffer-size": "maxBufferSize",
};
const PORTABLE_BINDING = 128 * 1024 * 1024;

// Firefox's GPU process completes WebGPU work on a 100 ms timer (Mozilla bug 1870699), so an awaited
// mapAsync resolves up to 100 ms after the work is done. A queue submission also polls the device, so
// while a read is pending we submit an empty command buffer every NUDGE_EVERY_MS, for at most NUDGE_LIMIT_MS.
// Measured on lavapipe (2 cores): nudging on every task stole the CPU the rasteriser computes with and
// slowed SmolLM2 decoding by ~25%; a sparse nudge costs little and still bounds the added wait.
const NUDGE_POLLS = typeof navigator !== "undefined" && /Firefox\//.test(navigator.userAgent);
const NUDGE_EVERY_MS = 8;
const NUDGE_LIMIT_MS = 2000;  // a lost device never resolves the map: stop submitting into it

// The next task, without setTimeout's minimum delay (a message to ourselves).
const taskChannel = new MessageChannel();
const taskWaiters = [];
taskChannel.port1.onmessage = () => taskWaiters.shift()?.();
function nextTask() {
  return new Promise((resolve) => { taskWaiters.push(resolve); taskChannel.port2.postMessage(null); });
}

// The first n non-empty lines of a (multi-line) WebGPU message, as one line.
function firstLines(message, n) {
  return String(message).split("\n").map((line) => line.trim()).filter(Boolean).slice(0, n).join(" ");
}

export class GpuHelper {
  static async create() {
    if (!navigator.gpu) throw new Error("WebGPU is not available in this browser");
    const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
    if (!adapter) throw new Error("no WebGPU adapter");
    const binding = Math.min(adapter.limits.maxStorageBufferBindingSize, PORTABLE_BINDING);
    const device = await adapter.requestDevice({
      requiredLimits: {
        maxStorageBufferBindingSize: binding,
        maxBufferSize: Math.min(adapter.limits.maxBufferSize, Math.max(binding, 256 * 1024 * 1024)),
        maxStorageBuffersPerShaderStage: Math.min(adapter.limits.maxStorageBuffersPerShaderStage, 8),
        maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
      },
    });
    const info = adapter.info || {};
    const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" ") || "WebGPU adapter";
    return new GpuHelper(device, name);
  }

  constructor(device, adapterName) {
    this.device = device;
    this.adapterName = adapterName;
    this.plans = [];
    this.staging = new Map();  // size -> mappable buffer, reused
    this.lostInfo = null;
    this.errors = [];  // validation errors, each naming the kernel or call it came from; check() throws them
    device.lost.then((info) => { this.lostInfo = info; });
    device.addEventListener?.("uncapturederror", (event) => { this.errors.push(firstLines(event.error?.message || event.error, 2)); });
  }

  // Runs create() inside a validation error scope; an error is recorded under `what` (it surfaces at the
  // next check(): creation stays synchronous, so loading waits on no extra GPU round trip per kernel).
  scoped(what, create) {
    this.device.pushErrorScope("validation");
    const made = create();
    this.device.popErrorScope().then((error) => { if (error) this.errors.push(`${what}: ${firstLines(error.message, 2)}`); });
    return made;
  }

  limits() {
    const out = {};
    for (const [python, js] of Object.entries(LIMIT_NAMES)) out[python] = this.device.limits[js];
    return out;
  }

  check() {
    if (this.lostInfo) throw new Error(`GPU device lost: ${this.lostInfo.message || this.lostInfo.reason}`);
    // The first error is the cause (an invalid kernel makes its bind groups and dispatches invalid too).
    if (this.errors.length) throw new Error(`WebGPU validation failed: ${this.errors[0]}`);
  }

  // usage: "storage" (kernels read/write, copied back), "uniform", or "storage+uniform"
  createBuffer(size, label, usage) {
    const storage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    const uniform = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
    const flags = { storage, uniform, "storage+uniform": storage | uniform }[usage];
    if (flags === undefined) throw new Error(`unknown buffer usage ${usage}`);
    return this.device.createBuffer({ size: Math.max(16, Math.ceil(size / 4) * 4), usage: flags, label });
  }

  // data: a typed array or ArrayBuffer (zero-copy from Python for JS-backed arrays); padded to 4 bytes.
  writeBuffer(buffer, offset, data) {
    let bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (bytes.byteLength % 4) {
      const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
      padded.set(bytes);
      bytes = padded;
    }
    this.device.queue.writeBuffer(buffer, offset, bytes);
  }

  // constantsJson: {name: number} for the kernel's `override` declarations, as JSON.
  createPipeline(code, entryPoint, label, constantsJson) {
    const constants = JSON.parse(constantsJson || "{}");
    return this.scoped(`kernel ${label}`, () => {
      const module = this.device.createShaderModule({ code, label });
      return this.device.createComputePipeline({ layout: "auto", compute: { module, entryPoint, constants }, label });
    });
  }

  // bindings: [[buffer, offset, size | null], ...] for @binding(0..n-1) of @group(0)
  createBindGroup(pipeline, bindings, label) {
    const entries = bindings.map(([buffer, offset, size], binding) => ({
      binding, resource: { buffer, offset, size: size ?? buffer.size - offset },
    }));
    return this.scoped(`bind group ${label}`, () => this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries, label }));
  }

  // steps: [[pipeline, bindGroup, x, y, z], ...] -> plan id
  registerPlan(steps) {
    this.plans.push(steps.map((s) => ({ pipeline: s[0], bindGroup: s[1], x: s[2], y: s[3], z: s[4] })));
    return this.plans.length - 1;
  }

  submitPlan(id) {
    this.check();
    const encoder = this.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (const step of this.plans[id]) {
      pass.setPipeline(step.pipeline);
      pass.setBindGroup(0, step.bindGroup);
      pass.dispatchWorkgroups(step.x, step.y, step.z);
    }
    pass.end();
    this.device.queue.submit([encoder.finish()]);
  }

  // staging.mapAsync(READ), nudging Firefox's device polls while it is pending (see NUDGE_POLLS).
  async mapForRead(staging) {
    const mapping = staging.mapAsync(GPUMapMode.READ);
    if (!NUDGE_POLLS) return mapping;
    let pending = true;
    const settled = mapping.finally(() => { pending = false; });
    const started = performance.now();
    await nextTask();  // a read that is already done costs no submission
    while (pending && performance.now() - started < NUDGE_LIMIT_MS) {
      await new Promise((resolve) => setTimeout(resolve, NUDGE_EVERY_MS));
      if (pending) this.device.queue.submit([this.device.createCommandEncoder().finish()]);
    }
    return settled;
  }

  async readBuffer(buffer, offset, size) {
    this.check();
    const bytes = Math.ceil(size / 4) * 4;
    let staging = this.staging.get(bytes);
    if (!staging) {
      staging = this.device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      this.staging.set(bytes, staging);
    }
    const encoder = this.device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffer, offset, staging, 0, bytes);
    this.device.queue.submit([encoder.finish()]);
    await this.mapForRead(staging);
    const copy = new Uint8Array(staging.getMappedRange().slice(0, size));
    staging.unmap();
    this.check();  // what the submitted work met (an invalid kernel, a lost device) fails this read
    return copy;
  }
}
