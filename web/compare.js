// compare.js — Compare: the last question rerun greedily with every proposer, one after another in this
// session, then a table, a verdict in plain words and two charts.
import { survivalChart, timeChart } from "./charts.js";

const $ = (id) => document.getElementById(id);
export const PROPOSER_NAMES = { none: "the model alone", prompt_lookup: "prompt lookup", neural: "the neural draft",
  hybrid: "hybrid", auto: "auto" };
const NOISE = 0.1;  // speed ratios within 10% of 1 are not called faster or slower (this machine is shared)

// Runs each proposer the engine (spec-chat.js) lists (skipping those that need a missing draft). progress(i, n, proposer)
// before each run; cancelled() is asked between runs. Resolves to the done events in order.
export async function runCompare(engine, info, request, { progress, cancelled }) {
  const proposers = info.proposers.all.filter((p) => info.draft || !info.proposers.need_draft.includes(p));
  const results = [];
  for (const [index, proposer] of proposers.entries()) {
    if (cancelled()) break;
    progress(index, proposers.length, proposer);
    let done = null;
    const spec = { ...request.speculative, proposer, k: proposer === "none" ? 0 : request.speculative.k, adaptive: false };
    await engine.run({ ...request, temperature: 0, speculative: spec }, (event) => { if (event.type === "done") done = event; });
    if (done && done.finish_reason !== "cancelled") results.push(done);
  }
  return results;
}

// The verdict in words: the fastest proposer against the model alone, and whether the text is the same.
export function verdict(results) {
  const base = results.find((r) => r.speculative.proposer === "none");
  const others = results.filter((r) => r !== base && r.speculative.tokens_per_second);
  if (!base || !others.length) return "Not enough runs to compare (the comparison was cancelled or had nothing to run).";
  const best = others.reduce((a, b) => (b.speculative.tokens_per_second > a.speculative.tokens_per_second ? b : a));
  const ratio = best.speculative.tokens_per_second / base.speculative.tokens_per_second;
  const name = PROPOSER_NAMES[best.speculative.proposer];
  const same = results.every((r) => JSON.stringify(r.tokens) === JSON.stringify(base.tokens));
  const text = same ? "the text is identical." : "the texts differ (see below).";
  if (!best.speculative.accepted) {
    return `No proposer got a draft token accepted on this question, so none can be faster than the model alone: ` +
      `the differences in the table are timing noise; ${text}`;
  }
  if (ratio < 1 - NOISE) return `Every proposer was slower than the model alone on this question (best: ${name}, ${ratio.toFixed(2)}×); ${text}`;
  if (ratio <= 1 + NOISE) return `${capitalise(name)} was about as fast as the model alone (${ratio.toFixed(2)}×, within timing noise); ${text}`;
  return `${capitalise(name)} answered ${ratio.toFixed(1)}× faster than the model alone on this question; ${text}`;
}

const capitalise = (text) => text[0].toUpperCase() + text.slice(1);

export function showComparison(results, info) {
  const base = results.find((r) => r.speculative.proposer === "none");
  const table = $("compare-table");
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const title of ["proposer", "tokens/s", "speed-up vs none", "tokens per model pass", "drafts accepted",
    "draft s", "verify s", "GPU wait s", "other s"]) {
    head.append(Object.assign(document.createElement("th"), { textContent: title, scope: "col" }));
  }
  const body = table.createTBody();
  for (const r of results) {
    const s = r.speculative;
    const speedup = base?.speculative.tokens_per_second ? s.tokens_per_second / base.speculative.tokens_per_second : null;
    const row = body.insertRow();
    row.dataset.proposer = s.proposer;
    const name = s.auto ? `auto (${s.auto.chose || "none"})` : s.proposer + (s.proposer === "none" ? "" : ` (k=${s.k})`);
    for (const value of [name, s.tokens_per_second?.toFixed(2), speedup === null ? null : speedup.toFixed(2) + "×",
      s.tokens_per_champion_call.toFixed(2), s.proposed ? `${s.accepted}/${s.proposed}` : "—",
      s.time_s.draft.toFixed(2), s.time_s.verify.toFixed(2), s.time_s.sync.toFixed(2), s.time_s.other.toFixed(2)]) {
      row.insertCell().textContent = value ?? "—";
    }
  }
  $("compare-verdict").textContent = verdict(results);
  const same = results.every((r) => JSON.stringify(r.tokens) === JSON.stringify(results[0].tokens));
  // WebGPU and the float32 CPU champion: each row's logits are bitwise the same however many rows a call
  // scores, so greedy outputs must match exactly. The compact CPU champion (champion.onnx, low-memory
  // fallback): its logits move by ~1e-4 with the number of rows, which can swap two candidates tied to
  // within that (docs/ARCHITECTURE.md, "What holds where").
  const cpu = info?.backend !== "WebGPU" && info?.cpuChampion === "fallback";
  $("compare-identity").textContent = same
    ? `Greedy outputs identical across ${results.length} proposers (${results[0]?.tokens.length ?? 0} tokens).`
    : cpu
      ? "Greedy outputs differ. On the CPU fallback this can happen where two candidate tokens are tied to within " +
        "~0.0001 in score: scoring several tokens at once changes the model's arithmetic slightly. Each answer is still " +
        "one the model could give alone."
      : "Greedy outputs DIFFER — this is a bug: on WebGPU speculation must not change the answer.";
  $("compare-identity").className = same || cpu ? "" : "error";
  survivalChart($("survival-chart"), results.filter((r) => r.speculative.proposer !== "none")
    .map((r) => ({ name: r.speculative.proposer, values: r.speculative.survival })));
  timeChart($("time-chart"), results.map((r) => ({ name: r.speculative.proposer, ...r.speculative.time_s })));
  $("compare-results").hidden = false;
}
