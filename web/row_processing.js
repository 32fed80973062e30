// The CPU champion's logits rows, processed where they already are (the JS Float32Array onnxruntime-web
// returned): each row's argmax, for greedy rounds, and a sampled row's distribution, for sampled rounds without
// a repetition penalty. Python (pyodide_app/processors.py, the reference) is slower at it in Pyodide: for one
// 49,152-wide row at temperature 0.7, side by side under Node (median of 15), list + process_row took 33.9 ms
// with top-p 0.9 (27.5 without, 49.2 with top-k 40), processedRow and its conversion to Python 2.6 (4.4, 7.3).
//
// processedRow follows processors.process_row step by step in IEEE doubles, so every operation but exp rounds
// as Python's does: x / T (divided, not multiplied by 1 / T); top-k by (logit desc, index asc); softmax as
// exp(x - max) over their correctly rounded sum (exactSum = math.fsum); top-p at the f32 threshold, candidates
// at or above max(p) / 4096 first, in (p desc, index asc) order, renormalised by the exact sum of the kept.
// exp is the JS engine's (fdlibm-like, within an ulp, as Pyodide's musl and the native glibc are), so the
// probabilities agree with Python's to a few ulps and the kept set is the same except where two candidates'
// running masses straddle top-p within such an ulp.

// Per row of row-major [rows, width] logits: the index of its largest value (the first of ties), or -1 where
// the row holds a NaN or an infinity (Python then reads that row itself, and reports it). ~0.1 ms a
// 49,152-wide row, where Python's list, checks and argmax of it take ~11 ms in Pyodide.
export function rowArgmax(data, width) {
  const out = new Int32Array(data.length / width);
  for (let r = 0; r < out.length; r++) {
    let best = 0;
    let top = -Infinity;
    for (let j = 0, i = r * width; j < width; j++, i++) {
      const x = data[i];
      if (!(x > -Infinity && x < Infinity)) {  // NaN fails both
        best = -1;
        break;
      }
      if (x > top) {
        top = x;
        best = j;
      }
    }
    out[r] = best;
  }
  return out;
}

// The correctly rounded sum of finite doubles (Python's math.fsum): Shewchuk's non-overlapping partials, then
// their sum rounded once, half-way cases settled by the sign of the partial below.
export function exactSum(values) {
  const partials = [];  // non-overlapping, increasing magnitude; their exact sum is the running sum
  let count = 0;
  for (let v = 0; v < values.length; v++) {
    let x = values[v];
    let kept = 0;
    for (let i = 0; i < count; i++) {
      let y = partials[i];
      if (Math.abs(x) < Math.abs(y)) {
        const swap = x;
        x = y;
        y = swap;
      }
      const high = x + y;
      const low = y - (high - x);
      if (low !== 0) partials[kept++] = low;
      x = high;
    }
    partials[kept] = x;
    count = kept + 1;
  }
  partials.length = count;
  let n = partials.length;
  if (n === 0) return 0;
  let high = partials[--n];
  let low = 0;
  while (n > 0) {
    const x = high;
    const y = partials[--n];
    high = x + y;
    low = y - (high - x);
    if (low !== 0) break;
  }
  if (n > 0 && ((low < 0 && partials[n - 1] < 0) || (low > 0 && partials[n - 1] > 0))) {
    const twice = low * 2;
    const rounded = high + twice;
    if (twice === rounded - high) high = rounded;
  }
  return high;
}

// Indices sorted by value, descending, ties by index ascending (Python's stable sort with reverse=True).
function byValueDescending(values, indices) {
  return indices.sort((a, b) => values[b] - values[a] || a - b);
}

// Row `row` of row-major [rows, width] f32 logits processed at temperature > 0, top-k (0: off) and top-p
// (1: off), without a repetition penalty. Returns {indices, probs}: with top-p < 1 the kept tokens (in
// (p desc, index asc) order) and their renormalised probabilities, every other token 0; with top-p = 1 every
// token's probability, indices null. null where Python must read the row itself: a NaN or +inf logit, or
// every token masked (it raises there, with its own message).
export function processedRow(data, row, width, temperature, topK, topP) {
  const logits = new Float64Array(width);
  let top = -Infinity;
  for (let j = 0, i = row * width; j < width; j++, i++) {
    const x = data[i];
    if (x !== x || x === Infinity) return null;
    logits[j] = temperature === 1 ? x : x / temperature;
    if (logits[j] > top) top = logits[j];
  }
  if (topK > 0 && topK < width) keepLargest(logits, topK);
  if (top === -Infinity) return null;
  const probs = new Float64Array(width);
  for (let j = 0; j < width; j++) probs[j] = Math.exp(logits[j] - top);
  const total = exactSum(probs);
  let largest = 0;
  for (let j = 0; j < width; j++) {
    probs[j] /= total;
    if (probs[j] > largest) largest = probs[j];
  }
  if (!(largest > 0)) return null;
  if (topP >= 1) return { indices: null, probs };
  const threshold = Math.fround(topP);
  const candidates = [];
  const least = largest / 4096;
  for (let j = 0; j < width; j++) if (least <= probs[j]) candidates.push(j);
  let [kept, reached] = nucleus(probs, byValueDescending(probs, candidates), threshold);
  if (!reached) [kept] = nucleus(probs, byValueDescending(probs, Array.from({ length: width }, (_, j) => j)), threshold);
  const keptMass = exactSum(kept.map((j) => probs[j]));
  return { indices: Int32Array.from(kept), probs: Float64Array.from(kept, (j) => probs[j] / keptMass) };
}

// Masks (-Infinity) all but the k largest logits, ties kept by lowest index (Python's stable sort by logit,
// descending, cut at k): every logit above the k-th largest value, then the first of those equal to it.
function keepLargest(logits, k) {
  const ascending = Float64Array.from(logits).sort();
  const kth = ascending[logits.length - k];
  let ties = 0;  // entries equal to the k-th largest inside the top k (at its start, ascending)
  for (let j = logits.length - k; j < logits.length && ascending[j] === kth; j++) ties++;
  for (let j = 0; j < logits.length; j++) {
    if (logits[j] > kth) continue;
    if (logits[j] === kth && ties > 0) {
      ties--;
      continue;
    }
    logits[j] = -Infinity;
  }
}

// The shortest prefix of `order` whose running mass reaches topP (stopping at a zero), and whether it got there.
function nucleus(probs, order, topP) {
  const kept = [];
  let mass = 0;
  for (const j of order) {
    if (probs[j] <= 0) return [kept, true];
    kept.push(j);
    mass += probs[j];
    if (mass >= topP) return [kept, true];
  }
  return [kept, false];
}
