// attention.wgsl — causal grouped-query attention over the KV cache.
// q: f32 [rows, H*HD] (rotated); k_cache, v_cache: f32 [KVH, CTX, HD]; out: f32 [rows, H*HD].
// Row t (absolute position p = position + t) of head h reads KV head h / (H / KVH), keys 0..p.
// Dispatch: (H, rows), one workgroup of 64 per (head, row). Invocation l takes keys l, l+64, ...
// in ascending order with an online softmax (m, l, acc); the 64 partial states are merged in
// invocation order 0..63. The result depends on p and the cache, never on `rows`.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> query: array<f32, HD>;
var<workgroup> maxima: array<f32, 64>;
var<workgroup> sums: array<f32, 64>;
var<workgroup> partial: array<f32, 64 * HD>;

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let head = wg.x;
    let t = wg.y;
    if (t >= params.rows) { return; }
    let kv = head / (H / KVH);
    let keys = params.position + t + 1u;
    for (var d = l; d < HD; d += 64u) { query[d] = q[t * H * HD + head * HD + d]; }
    workgroupBarrier();

    var m = NEG_BIG;
    var s = 0.0;
    var acc: array<f32, HD>;
    for (var j = l; j < keys; j += 64u) {
        let row = (kv * CTX + j) * HD;
        var score = 0.0;
        for (var d = 0u; d < HD; d++) { score += query[d] * k_cache[row + d]; }
        score *= SCALE;
        let m_new = max(m, score);
        let correction = exp(m - m_new);
        let p = exp(score - m_new);
        s = s * correction + p;
        for (var d = 0u; d < HD; d++) { acc[d] = acc[d] * correction + p * v_cache[row + d]; }
        m = m_new;
    }
    maxima[l] = m;
    workgroupBarrier();
    var top = NEG_BIG;
    for (var i = 0u; i < 64u; i++) { top = max(top, maxima[i]); }
    let weight = exp(m - top);
    sums[l] = s * weight;
    for (var d = 0u; d < HD; d++) { partial[l * HD + d] = acc[d] * weight; }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < 64u; i++) { total += sums[i]; }
    for (var d = l; d < HD; d += 64u) {
        var value = 0.0;
        for (var i = 0u; i < 64u; i++) { value += partial[i * HD + d]; }
        out[t * H * HD + head * HD + d] = value / total;
    }
}
