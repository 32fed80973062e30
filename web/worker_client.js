// worker_client.js — the page's side of the worker protocol (worker.js): one chat at a time streams its
// events; calls (fit, kernel, peer, …) answer once. Load progress, ready and fatal go to the handlers given.
export class WorkerClient {
  constructor(url, { onProgress, onReady, onFatal }) {
    this.worker = new Worker(url, { type: "module" });
    this.pending = new Map();  // id -> {onEvent, resolve}
    this.nextId = 1;
    this.worker.onmessage = ({ data }) => {
      if (data.type === "progress") onProgress(data);
      else if (data.type === "ready") onReady(data.info);
      else if (data.type === "fatal") onFatal(data.message);
      else if (data.type === "event") this.pending.get(data.id)?.onEvent(data.event);
      else if (data.type === "chat-end" || data.type === "result") {
        this.pending.get(data.id)?.resolve(data);
        this.pending.delete(data.id);
      }
    };
  }

  load(options) {
    this.worker.postMessage({ type: "load", ...options });
  }

  // Streams one request's events to onEvent; resolves when the answer has ended.
  chat(request, onEvent) {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, { onEvent, resolve });
      this.worker.postMessage({ type: "chat", id, request });
    });
  }

  // The running answer stops at its next round boundary.
  stop() {
    this.worker.postMessage({ type: "stop" });
  }

  call(type, payload = {}) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: (data) => (data.error ? reject(new Error(data.error)) : resolve(data.value)) });
      this.worker.postMessage({ type, id, ...payload });
    });
  }
}
