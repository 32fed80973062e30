// settings.js — generation settings: defaults, what is stored (localStorage), and the check of every field
// against the engine's real limits (the worker's info.limits). A request is only ever built from stored,
// checked settings, which are the values the Settings dialog shows.

export const DEFAULTS = { proposer: "auto", k: 8, adaptive: false, temperature: 0, top_p: 1, top_k: 0,
  repetition_penalty: 1, seed: null, max_tokens: 256 };  // seed null: a fresh random seed per answer
const STORAGE_KEY = "spec-chat-settings";
const MAX_TEMPERATURE = 2;  // the engine takes any T >= 0; above 2 SmolLM2 writes noise
const REPETITION_PENALTY = [0.5, 3];  // the engine takes any value > 0

export function loadSettings() {
  try { return { ...DEFAULTS, ...JSON.parse(localStorage.getItem(STORAGE_KEY) || "{}") }; } catch { return { ...DEFAULTS }; }
}

export function saveSettings(settings) {
  localStorage.setItem(STORAGE_KEY, JSON.stringify(settings));
}

// The form's values as numbers, booleans and strings (a number field that does not parse becomes NaN).
export function readForm(form) {
  const settings = {};
  for (const [key, fallback] of Object.entries(DEFAULTS)) {
    const input = form.elements[key];
    if (key === "seed") settings[key] = input.value.trim() === "" ? null : Number(input.value);
    else if (typeof fallback === "boolean") settings[key] = input.checked;
    else if (typeof fallback === "number") settings[key] = input.value.trim() === "" ? NaN : Number(input.value);
    else settings[key] = input.value;
  }
  return settings;
}

export function showForm(form, settings) {
  for (const [key, value] of Object.entries(settings)) {
    const input = form.elements[key];
    if (input.type === "checkbox") input.checked = value; else input.value = value ?? "";
  }
}

const whole = (value, low, high) => Number.isSafeInteger(value) && value >= low && value <= high;

// {field: problem in words} for every invalid field (empty when all are valid).
// limits: {kMax, context (tokens), minTemperature, vocab} from the engine.
export function fieldErrors(s, limits) {
  const errors = {};
  if (!whole(s.k, 1, limits.kMax)) errors.k = `k must be a whole number from 1 to ${limits.kMax}`;
  if (s.proposer === "auto" && s.adaptive) errors.adaptive = "adaptive k does not combine with auto, which chooses k itself";
  if (!(s.temperature === 0 || (s.temperature >= limits.minTemperature && s.temperature <= MAX_TEMPERATURE))) {
    errors.temperature = `temperature must be 0 (greedy) or from ${limits.minTemperature} to ${MAX_TEMPERATURE}`;
  }
  if (!(s.top_p > 0 && s.top_p <= 1)) errors.top_p = "top-p must be above 0 and at most 1";
  if (!whole(s.top_k, 0, limits.vocab)) errors.top_k = `top-k must be a whole number from 0 (off) to ${limits.vocab}`;
  const [low, high] = REPETITION_PENALTY;
  if (!(s.repetition_penalty >= low && s.repetition_penalty <= high)) {
    errors.repetition_penalty = `repetition penalty must be from ${low} to ${high} (1 = off)`;
  }
  if (s.seed !== null && !whole(s.seed, 0, Number.MAX_SAFE_INTEGER)) errors.seed = "seed must be empty (random) or a whole number, 0 or more";
  if (!whole(s.max_tokens, 1, limits.context - 1)) {
    errors.max_tokens = `max tokens must be a whole number from 1 to ${limits.context - 1} (the model's context is ${limits.context} tokens)`;
  }
  return errors;
}

// Marks each field (aria-invalid, its message under it); returns the first invalid input or null.
export function markErrors(form, errors) {
  let first = null;
  for (const key of Object.keys(DEFAULTS)) {
    const input = form.elements[key];
    const note = form.querySelector(`[data-error-for="${key}"]`);
    const problem = errors[key] ?? null;
    input.setAttribute("aria-invalid", String(Boolean(problem)));
    if (note) {  // every field that can be wrong has one (the proposer menu cannot be)
      note.textContent = problem ?? "";
      note.hidden = !problem;
    }
    if (problem && !first) first = input;
  }
  return first;
}

// The engine request for a conversation (messages as the model reads them) under settings s.
export function buildRequest(s, messages, overrides = {}) {
  const m = { ...s, ...overrides };
  return {
    messages, max_tokens: m.max_tokens, temperature: m.temperature, top_p: m.top_p, top_k: m.top_k,
    repetition_penalty: m.repetition_penalty, ...(m.seed === null ? {} : { seed: m.seed }),
    speculative: { proposer: m.proposer, k: m.proposer === "none" ? 0 : m.k, adaptive: m.adaptive },
  };
}
