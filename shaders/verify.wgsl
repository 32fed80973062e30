// verify.wgsl — on-device acceptance: the WGSL twin of pyodide_app/acceptance.py + processors.py.
// Needs philox.wgsl. One workgroup of 256 invocations; dispatch (1, 1, 1).
// Inputs:  logits f32 [k+1, V] (row j scores the token after input j; input 0 is the frontier);
//          tokens u32 [k+1] (tokens[1 + i] = draft i); presence u32 [ceil(V/32)] (bit set: token in the
//          committed context); q f32 [k, Q] draft rows (Q = V for full rows, the reduced size for reduced
//          rows with ids in id_map; unused for point masses); work f32 [2V] (processed row, residual).
// Output:  result: VerifyResult (accepted A, terminal token, a RESULT_* kind, a STATUS_* code, rows processed).
// Settings: cfg: Verify. Both structs and the codes come from pyodide_app/kernel_abi.py.
// Row j is processed at history context + drafts[0..j): repetition penalty (logit > 0: * (1/r), else * r)
// -> greedy argmax (lowest index wins) or temperature -> top-k (ties to the lowest index) -> softmax ->
// top-p (shortest prefix by (p desc, index asc) reaching p). Each invocation owns a contiguous chunk of
// the vocabulary; partial results are combined in a fixed order, so results are deterministic.
@group(0) @binding(0) var<uniform> cfg: Verify;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> tokens: array<u32>;
@group(0) @binding(3) var<storage, read> presence: array<u32>;
@group(0) @binding(4) var<storage, read> q: array<f32>;
@group(0) @binding(5) var<storage, read> id_map: array<u32>;
@group(0) @binding(6) var<storage, read_write> work: array<f32>;
@group(0) @binding(7) var<storage, read_write> result: VerifyResult;

const LANES: u32 = 256u;
const CHUNK: u32 = (V + LANES - 1u) / LANES;
// RESIDUAL_FLOOR comes from the header (acceptance.FLOAT_RESIDUAL_FLOOR): a residual mass at or below it is
// rounding noise -> STATUS_RESIDUAL_MASS, on both verifiers.
const NEG_INF_BITS: u32 = 0xff800000u;
// Probabilities below the smallest normal f32 are flushed to 0: many GPUs flush denormals anyway, so this
// makes every adapter agree, and CPU rasterizers (lavapipe, SwiftShader) avoid slow denormal arithmetic.
const MIN_NORMAL: f32 = 1.17549435e-38;

var<workgroup> red_f: array<f32, 256>;
var<workgroup> red_u: array<u32, 256>;
var<workgroup> red_v: array<vec4<f32>, 256>;
var<workgroup> shared_f: f32;
var<workgroup> shared_u: u32;
var<workgroup> flag: u32;
var<private> greedy_token: u32;  // greedy rows: the processed row's argmax (the same in every lane)

fn chunk_start(lane: u32) -> u32 { return min(lane * CHUNK, V); }
fn chunk_end(lane: u32) -> u32 { return min(lane * CHUNK + CHUNK, V); }

// ---- fixed-order reductions over the 256 lanes (all lanes must call) -------------------------------
fn reduce_sum(lane: u32, value: f32) -> f32 {
    red_f[lane] = value;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lane < stride) { red_f[lane] += red_f[lane + stride]; }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&red_f[0]);  // uniform: results steer control flow (Tint checks this)
}

// Four reduce_sums at once: each component is the same tree of additions as reduce_sum's.
fn reduce_sum4(lane: u32, value: vec4<f32>) -> vec4<f32> {
    red_v[lane] = value;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lane < stride) { red_v[lane] += red_v[lane + stride]; }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&red_v[0]);
}

fn reduce_max(lane: u32, value: f32) -> f32 {
    red_f[lane] = value;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lane < stride) { red_f[lane] = max(red_f[lane], red_f[lane + stride]); }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&red_f[0]);
}

fn reduce_count(lane: u32, value: u32) -> u32 {
    red_u[lane] = value;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lane < stride) { red_u[lane] += red_u[lane + stride]; }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&red_u[0]);
}

// Exclusive prefix over lanes, in lane order (lane 0 adds sequentially: deterministic).
fn exclusive_prefix_f(lane: u32, value: f32) -> f32 {
    red_f[lane] = value;
    workgroupBarrier();
    if (lane == 0u) {
        var running = 0.0;
        for (var i = 0u; i < LANES; i++) {
            let v = red_f[i];
            red_f[i] = running;
            running += v;
        }
    }
    workgroupBarrier();
    let before = red_f[lane];
    workgroupBarrier();
    return before;
}

fn exclusive_prefix_u(lane: u32, value: u32) -> u32 {
    red_u[lane] = value;
    workgroupBarrier();
    if (lane == 0u) {
        var running = 0u;
        for (var i = 0u; i < LANES; i++) {
            let v = red_u[i];
            red_u[i] = running;
            running += v;
        }
    }
    workgroupBarrier();
    let before = red_u[lane];
    workgroupBarrier();
    return before;
}

// Order-preserving u32 key of an f32 (larger float -> larger key); -0 and +0 share a key (they are equal).
fn order_key(x: f32) -> u32 {
    let bits = select(bitcast<u32>(x), 0u, bitcast<u32>(x) == 0x80000000u);
    return select(bits | 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
}

// ---- the processed row --------------------------------------------------------------------------------
fn seen(token: u32, row: u32) -> bool {
    if (((presence[token >> 5u] >> (token & 31u)) & 1u) != 0u) { return true; }
    for (var i = 0u; i < row; i++) {
        if (tokens[1u + i] == token) { return true; }
    }
    return false;
}

fn penalized(row: u32, i: u32) -> f32 {
    let x = logits[row * V + i];
    if (cfg.penalty == 1.0 || !seen(i, row)) { return x; }
    return select(x * cfg.penalty, x * (1.0 / cfg.penalty), x > 0.0);
}

// work[0..V) <- the processed distribution of `row`; returns STATUS_OK or STATUS_TARGET_NUMERIC.
// Greedy rows are a point mass on the argmax (lowest index wins): only greedy_token is set, work is not.
fn process_row(lane: u32, row: u32) -> u32 {
    let start = chunk_start(lane);
    let end = chunk_end(lane);
    var bad = 0u;
    var valid = 0u;
    var best = NEG_BIG;
    var best_index = V;
    for (var i = start; i < end; i++) {
        let x = penalized(row, i);
        let bits = bitcast<u32>(x);  // bit tests: no fast-math assumptions about NaN or infinity
        if ((bits & 0x7fffffffu) >= 0x7f800000u && bits != NEG_INF_BITS) { bad = 1u; }  // NaN or +inf
        if (bits != NEG_INF_BITS) { valid += 1u; }  // -inf masks the token, as in processors.py
        let scaled = select(x / cfg.temperature, x, cfg.greedy == 1u);
        work[i] = scaled;  // scaled logits for now
        if (scaled > best) { best = scaled; best_index = i; }
    }
    if (reduce_count(lane, bad) > 0u || reduce_count(lane, valid) == 0u) { return STATUS_TARGET_NUMERIC; }
    // Argmax, lowest index among equal maxima: the max value, then the smallest index holding it.
    let top = reduce_max(lane, best);
    let winner = V - reduce_max_index(lane, select(0u, V - best_index, best == top));
    if (cfg.greedy == 1u) {
        greedy_token = winner;
        return STATUS_OK;
    }
    if (cfg.top_k > 0u && cfg.top_k < V) { apply_top_k(lane); }
    // Softmax over the kept entries (masked entries hold NEG_BIG and get 0).
    var local = 0.0;
    for (var i = start; i < end; i++) {
        let raw = exp(work[i] - top);
        let e = select(raw, 0.0, work[i] <= NEG_BIG || raw < MIN_NORMAL);
        work[i] = e;
        local += e;
    }
    let total = reduce_sum(lane, local);
    for (var i = start; i < end; i++) { work[i] = work[i] / total; }
    workgroupBarrier();
    if (cfg.top_p < 1.0) { apply_top_p(lane); }
    return STATUS_OK;
}

fn reduce_max_index(lane: u32, value: u32) -> u32 {
    red_u[lane] = value;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lane < stride) { red_u[lane] = max(red_u[lane], red_u[lane + stride]); }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&red_u[0]);
}

// Keep the k largest scaled logits (ties: lowest index); the rest become NEG_BIG.
fn apply_top_k(lane: u32) {
    let start = chunk_start(lane);
    let end = chunk_end(lane);
    // Largest key tau with count(key >= tau) >= k, by bisection over the 32-bit key space.
    var low = 0u;
    var high = 0xffffffffu;
    for (var step = 0u; step < 32u; step++) {
        let mid = low + (high - low) / 2u + ((high - low) & 1u);  // ceil midpoint without overflow
        var count = 0u;
        for (var i = start; i < end; i++) { count += select(0u, 1u, order_key(work[i]) >= mid); }
        if (reduce_count(lane, count) >= cfg.top_k) { low = mid; } else { high = mid - 1u; }
    }
    var above = 0u;
    var ties = 0u;
    for (var i = start; i < end; i++) {
        let key = order_key(work[i]);
        above += select(0u, 1u, key > low);
        ties += select(0u, 1u, key == low);
    }
    let total_above = reduce_count(lane, above);
    var tie_rank = exclusive_prefix_u(lane, ties);
    let keep_ties = cfg.top_k - total_above;
    for (var i = start; i < end; i++) {
        let key = order_key(work[i]);
        var keep = key > low;
        if (key == low) {
            keep = tie_rank < keep_ties;
            tie_rank += 1u;
        }
        if (!keep) { work[i] = NEG_BIG; }
    }
    workgroupBarrier();
}

// A lane's entries of work[start, end) with key >= floor_key, copied in index order to work[V + start ..]
// (free until the residual): how many, their sum in index order, the largest.
struct Copied { count: u32, mass: f32, largest: f32 };
fn copy_from(start: u32, end: u32, floor_key: u32) -> Copied {
    var copied = Copied(0u, 0.0, 0.0);
    for (var i = start; i < end; i++) {
        let x = work[i];
        if (order_key(x) >= floor_key) {
            work[V + start + copied.count] = x;
            copied.count += 1u;
            copied.mass += x;
            copied.largest = max(copied.largest, x);
        }
    }
    return copied;
}

// Keep the shortest prefix by (p desc, index asc) whose mass reaches top_p; renormalise.
fn apply_top_p(lane: u32) {
    let start = chunk_start(lane);
    let end = chunk_end(lane);
    // tau = the largest key with mass(key >= tau) >= top_p (the probability of the cut element), by bisection.
    // mass(key >= mid) is each lane's sum, in index order, of its entries with key >= mid, then reduce_sum:
    // monotone in mid, so any start [low, high] holding tau gives the same tau. Entries below
    // floor = (1 - top_p) / V hold less than 1 - top_p together, so tau is usually >= floor: each lane then
    // copies its entries >= floor (copy_from) and the bisection scans only those (far fewer than V where the
    // row is peaked) — the same terms in the same order, so the same sums. Where mass(key >= floor) < top_p
    // after rounding, it copies every entry.
    let floor_key = order_key((1.0 - cfg.top_p) / f32(V));
    var candidates = copy_from(start, end, floor_key);
    let pruned = reduce_sum(lane, candidates.mass) >= cfg.top_p;
    if (!pruned) { candidates = copy_from(start, end, 0u); }  // every entry
    var low = select(0u, floor_key, pruned);
    var high = order_key(reduce_max(lane, candidates.largest));  // mass(key > the largest key) = 0 < top_p
    let base = V + start;
    // Each step tries 4 mids splitting [low, high] into 5 (one reduction for all 4): about 12 steps, not 32.
    while (low < high) {
        let span = high - low;
        let part = span / 5u;
        let extra = span % 5u;
        let mids = vec4<u32>(low) + vec4<u32>(1u, 2u, 3u, 4u) * part + min(vec4<u32>(1u, 2u, 3u, 4u), vec4<u32>(extra));
        var mass = vec4<f32>(0.0);
        for (var c = base; c < base + candidates.count; c++) {
            mass += select(vec4<f32>(0.0), vec4<f32>(work[c]), vec4<u32>(order_key(work[c])) >= mids);
        }
        let reached = reduce_sum4(lane, mass) >= vec4<f32>(cfg.top_p);  // a prefix: mass falls as mid rises
        var next_low = low;
        var next_high = high;
        for (var j = 0u; j < 4u; j++) {
            if (reached[j]) { next_low = mids[j]; }
        }
        for (var j = 4u; j > 0u; j--) {
            if (!reached[j - 1u]) { next_high = mids[j - 1u] - 1u; }
        }
        low = next_low;
        high = next_high;
    }
    var above = 0.0;
    var ties = 0u;
    for (var i = start; i < end; i++) {
        let key = order_key(work[i]);
        above += select(0.0, work[i], key > low);
        ties += select(0u, 1u, key == low);
    }
    let mass_above = reduce_sum(lane, above);
    let cut = bitcast<f32>(select(~low, low & 0x7fffffffu, (low & 0x80000000u) != 0u));
    // Ties at the cut join in index order until the mass reaches top_p.
    var needed = 0u;
    if (lane == 0u) {
        var mass = mass_above;
        while (mass < cfg.top_p && cut > 0.0 && needed < V) { mass += cut; needed += 1u; }
        shared_u = needed;
    }
    let keep_ties = workgroupUniformLoad(&shared_u);
    var tie_rank = exclusive_prefix_u(lane, ties);
    var kept = 0.0;
    for (var i = start; i < end; i++) {
        let key = order_key(work[i]);
        var keep = key > low && work[i] > 0.0;
        if (key == low) {
            keep = tie_rank < keep_ties && work[i] > 0.0;
            tie_rank += 1u;
        }
        if (!keep) { work[i] = 0.0; }
        kept += work[i];
    }
    let total = reduce_sum(lane, kept);
    for (var i = start; i < end; i++) { work[i] = work[i] / total; }
    workgroupBarrier();
}

// ---- sampling -----------------------------------------------------------------------------------------
// Inverse CDF in index order over work[base .. base+V): first i with p_i > 0 and cumsum >= u * total.
fn sample(lane: u32, base: u32, u: f32) -> u32 {
    let start = chunk_start(lane);
    let end = chunk_end(lane);
    var local = 0.0;
    var last_positive = V;
    for (var i = start; i < end; i++) {
        local += work[base + i];
        if (work[base + i] > 0.0) { last_positive = i; }
    }
    let before = exclusive_prefix_f(lane, local);
    let total = reduce_sum(lane, local);
    let goal = u * total;
    if (lane == 0u) { shared_u = V; }
    workgroupBarrier();
    // The lane whose range crosses the target scans it (lanes after it may cross too: take the first).
    var found = V;
    if (local > 0.0 && before + local >= goal) {
        var running = before;
        for (var i = start; i < end; i++) {
            let p = work[base + i];
            if (p > 0.0) {
                running += p;
                if (running >= goal) { found = i; break; }
            }
        }
    }
    let first = V - reduce_max_index(lane, select(0u, V - found, found < V));
    // Rounding shortfall at the very end: the last positive index.
    let fallback = reduce_max_index(lane, select(0u, last_positive + 1u, last_positive < V));
    return select(first, fallback - 1u, first >= V);
}

// Full and reduced rows only: a point mass is decided by the coupled branch of verify(), never reaching here.
fn draft_prob(row: u32, token: u32) -> f32 {
    if (cfg.draft_kind == DRAFT_FULL_ROWS) { return q[row * V + token]; }
    for (var m = 0u; m < cfg.reduced; m++) {
        if (id_map[m] == token) { return q[row * cfg.reduced + m]; }
    }
    return 0.0;
}

// work[V .. 2V) <- [p - q]+ of row `row` (full or reduced q, as draft_prob); returns its mass.
fn residual(lane: u32, row: u32) -> f32 {
    let start = chunk_start(lane);
    let end = chunk_end(lane);
    var local = 0.0;
    for (var i = start; i < end; i++) {
        var q_i = 0.0;
        if (cfg.draft_kind == DRAFT_FULL_ROWS) { q_i = q[row * V + i]; }
        if (RESAMPLE_FROM_TARGET) { q_i = 0.0; }  // negative control only (tests): the wrong residual p
        work[V + i] = max(work[i] - q_i, 0.0);
    }
    workgroupBarrier();
    if (cfg.draft_kind == DRAFT_REDUCED_ROWS && !RESAMPLE_FROM_TARGET) {
        for (var m = lane; m < cfg.reduced; m += LANES) {
            let id = id_map[m];
            work[V + id] = max(work[id] - q[row * cfg.reduced + m], 0.0);
        }
    }
    workgroupBarrier();
    for (var i = start; i < end; i++) { local += work[V + i]; }
    return reduce_sum(lane, local);
}

fn finish(lane: u32, accepted: u32, terminal: u32, kind: u32, status: u32, rows: u32) {
    if (lane == 0u) {
        result.accepted = accepted;
        result.terminal = terminal;
        result.kind = kind;
        result.status = status;
        result.rows = rows;
    }
}

@compute @workgroup_size(256)
fn verify(@builtin(local_invocation_index) lane: u32) {
    let seed = vec2<u32>(cfg.seed_lo, cfg.seed_hi);
    let k = cfg.drafts;
    for (var row = 0u; row <= k; row++) {
        if (process_row(lane, row) != STATUS_OK) {
            finish(lane, row, 0u, RESULT_SAMPLE, STATUS_TARGET_NUMERIC, row + 1u);
            return;
        }
        if (row == k) { break; }
        let y = tokens[1u + row];
        if (cfg.greedy == 0u && cfg.draft_kind == DRAFT_POINT_MASSES) {
            // Coupled: the draft passes iff it is the champion's own sample of this token (P = p(y)); else that
            // sample is the correction, which is then p restricted to tokens other than y: norm([p - delta_y]+).
            let drawn = sample(lane, 0u, uniform24(seed, DOMAIN_TOKEN, cfg.token + row, 0u));
            if (lane == 0u) { shared_u = drawn; }
            let champion_token = workgroupUniformLoad(&shared_u);
            if (champion_token == y) { continue; }
            var correction = champion_token;
            if (RESAMPLE_FROM_TARGET) {  // negative control only (tests): a fresh sample of p, which may be y
                correction = sample(lane, 0u, uniform24(seed, DOMAIN_CORRECTION, cfg.round, row));
            }
            finish(lane, row, correction, RESULT_CORRECTION, STATUS_OK, row + 1u);
            return;
        }
        if (lane == 0u) {
            var accept = 0u;
            var status = STATUS_OK;
            if (cfg.greedy == 1u) {
                accept = select(0u, 1u, y == greedy_token);
            } else {
                let q_y = draft_prob(row, y);
                if (!(q_y > 0.0)) { status = STATUS_DRAFT_NUMERIC; }
                let a = min(1.0, work[y] / q_y);
                accept = select(0u, 1u, status == STATUS_OK && uniform24(seed, DOMAIN_ACCEPT, cfg.round, row) <= a);
            }
            shared_u = accept | (status << 1u);
        }
        let decision = workgroupUniformLoad(&shared_u);
        if ((decision >> 1u) != 0u) {
            finish(lane, row, 0u, RESULT_SAMPLE, decision >> 1u, row + 1u);
            return;
        }
        if ((decision & 1u) == 1u) { continue; }
        // First rejection: greedy -> the row's argmax; stochastic -> sample the residual.
        if (cfg.greedy == 1u) {
            finish(lane, row, greedy_token, RESULT_CORRECTION, STATUS_OK, row + 1u);
            return;
        }
        let mass = residual(lane, row);
        if (!(mass > RESIDUAL_FLOOR)) {
            finish(lane, row, 0u, RESULT_SAMPLE, STATUS_RESIDUAL_MASS, row + 1u);
            return;
        }
        let terminal = sample(lane, V, uniform24(seed, DOMAIN_CORRECTION, cfg.round, row));
        finish(lane, row, terminal, RESULT_CORRECTION, STATUS_OK, row + 1u);
        return;
    }
    // All k accepted (or k = 0): bonus / plain sample from row k, the champion's own sample of that token.
    if (cfg.greedy == 1u) {
        finish(lane, k, greedy_token, select(RESULT_BONUS, RESULT_SAMPLE, k == 0u), STATUS_OK, k + 1u);
        return;
    }
    let terminal = sample(lane, 0u, uniform24(seed, DOMAIN_TOKEN, cfg.token + k, 0u));
    finish(lane, k, terminal, select(RESULT_BONUS, RESULT_SAMPLE, k == 0u), STATUS_OK, k + 1u);
}
