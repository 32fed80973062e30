// Types for spec-chat.js, the embeddable OpenAI-style API (same origin as the site).

export type Role = "system" | "user" | "assistant";
export type Proposer = "auto" | "none" | "prompt_lookup" | "neural" | "hybrid";
export type FinishReason = "stop" | "length";

export interface Message {
  role: Role;
  content: string;
  /** Read only on the last message with `continue_final_message`: the ids the model wrote for it
   * (`speculative.tokens` of the answers it is made of), so the model extends exactly them. They must spell
   * `content` (`speculative.answer_text`), else the request is refused. */
  tokens?: number[];
}

export interface Progress {
  phase: "runtime" | "model" | "gpu";
  done: number;
  total: number;
  label: string;
}

export interface EngineOptions {
  /** Folder URL of the model package (manifest.json inside); default: the site's own model. */
  model?: string;
  onProgress?: (progress: Progress) => void;
  /** A failure after loading (for example the GPU device was lost); the engine cannot answer any more. */
  onFatal?: (message: string) => void;
  /** Where the champion runs: "auto" (the faster, measured at the first load), "webgpu" or "cpu". */
  backend?: "auto" | "webgpu" | "cpu";
  /** Context limit in tokens (at most the model's). */
  context?: number;
}

export interface CompletionParams {
  messages: Message[];
  stream?: boolean;
  max_tokens?: number;
  /** 0 = greedy. */
  temperature?: number;
  top_p?: number;
  top_k?: number;
  repetition_penalty?: number;
  /** Omitted: a fresh random seed, reported in `speculative.seed`. */
  seed?: number;
  stop?: string | string[];
  /** Carry on the last (assistant) message instead of answering after it. */
  continue_final_message?: boolean;
  speculative?: { proposer?: Proposer; k?: number; adaptive?: boolean };
  signal?: AbortSignal;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface SpeculativeResult {
  proposer: Proposer;
  k: number;
  accepted: number;
  proposed: number;
  acceptance_rate: number | null;
  tokens_per_champion_call: number;
  tokens_per_second: number | null;
  seed: number;
  /** Set when speculation could not run and the champion answered alone (the answer is still exact). */
  fallback_code: string | null;
  auto: object | null;
  /** The answer's exact token ids. */
  tokens: number[];
  /** The whole assistant message as it now reads: after a continued message's content, a character the cut
   * split made whole. */
  answer_text: string;
  time_s: { draft: number; verify: number; sync: number; other: number; total: number };
  receipt: object;
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: [{ index: 0; message: { role: "assistant"; content: string }; finish_reason: FinishReason }];
  usage: Usage;
  speculative: SpeculativeResult;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: [{ index: 0; delta: { role?: "assistant"; content?: string }; finish_reason: FinishReason | null }];
  /** On the last chunk only. */
  usage?: Usage;
  speculative?: SpeculativeResult;
}

export interface EngineInfo {
  model: string;
  license: string | null;
  backend: "WebGPU" | "CPU" | "CPU fallback";
  adapter: string;
  kernel_variant: string | null;
  limits: { kMax: number; context: number; minTemperature: number; vocab: number };
  draft: string | null;
  proposers: Proposer[];
}

export interface SelfTestCheck {
  /** batch_invariance | golden_greedy | philox | verify_fixtures */
  name: string;
  passed: boolean;
  /** What was compared, or the first difference found, in words. */
  detail: string;
  seconds: number;
}

/** "Is it exact on this device?": the champion in use checked against the values the package's build recorded. */
export interface SelfTestReport {
  passed: boolean;
  checks: SelfTestCheck[];
  seconds: number;
  adapter: string;
  backend: "WebGPU" | "CPU" | "CPU fallback";
  kernel_variant: string | null;
  cpu_champion: "cpu_champion" | "fallback" | null;
  /** backend | adapter | champion weights: results are kept per key. */
  key: string;
  /** ISO 8601 time of the run. */
  at: string;
}

export interface Engine {
  chat: {
    completions: {
      create(params: CompletionParams & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk>>;
      create(params: CompletionParams & { stream?: false }): Promise<ChatCompletion>;
    };
  };
  info(): EngineInfo;
  /** How much of a conversation fits with `room` tokens left for the answer. */
  fit(messages: Message[], room: number): Promise<{ dropped: number; prompt_tokens: number; fits: boolean; limit: number }>;
  /** The engine's own events for one request (docs/ENGINE.md: "delta" with token ids, "done" with every number,
   * "rejected" with a code), each passed to onEvent; resolves when the answer has ended. The chat page streams
   * with it; most pages want chat.completions.create. */
  run(request: object, onEvent: (event: { type: string; [field: string]: unknown }) => void): Promise<void>;
  /** Stops the running answer at its next round boundary (its done event says "cancelled"). */
  stop(): void;
  /** Runs the exactness self-test after any request in progress (seconds on a software adapter). */
  selfTest(): Promise<SelfTestReport>;
  unload(): void;
}

/** code: INVALID_SETTINGS, PROMPT_TOO_LONG, DEVICE, DRAFT_RUNTIME, TARGET_NUMERIC, … (the engine's stable codes),
 * LOAD (the model did not load), ENGINE_EXISTS (one engine per page), UNLOADED, SELF_TEST (the self-test could
 * not run; failed checks are a report with passed: false). */
export class SpecChatError extends Error {
  code: string;
  /** The text produced before a failure mid-answer. */
  partial?: string;
}

export const PROPOSERS: Proposer[];
export function createEngine(options?: EngineOptions): Promise<Engine>;
