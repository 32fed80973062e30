// attention.wgsl — causal grouped-query attention over the KV cache.
// q: the q part of qkv f32 [rows, QKV] (rope_kv.wgsl; rotated); k_cache, v_cache: f32 [KVH, CTX, HD];
// out: f32 [rows, H*HD]; all read as vec4s (HD4 = HD/4 per head row), so a key or value row is HD4 loads.
// Row t (absolute position p = position + t) of head h reads KV head h / (H / KVH), keys 0..p.
// Dispatch: (H, rows), one workgroup of LANES (prepended by the host, per kernel family) per (head, row).
// Invocation l takes keys l, l+LANES, ... in ascending order with an online softmax (m, s, acc); a score is
// the 4 lane sums of query*key over d4 = 0..HD4-1 (ascending), then (x + y) + (z + w). The LANES partial
// states are merged in invocation order. The result depends on p, the cache and LANES, never on `rows`.
const HD4: u32 = HD / 4u;
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

var<workgroup> maxima: array<f32, LANES>;
var<workgroup> sums: array<f32, LANES>;
var<workgroup> partial: array<vec4<f32>, LANES * HD4>;
var<workgroup> merged_max: f32;
var<workgroup> merged_sum: f32;

@compute @workgroup_size(LANES)
fn attention(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let head = wg.x;
    let t = wg.y;
    if (t >= params.rows) { return; }
    let kv = head / (H / KVH);
    let keys = params.position + t + 1u;
    var query: array<vec4<f32>, HD4>;
    for (var d = 0u; d < HD4; d++) { query[d] = qkv[t * (QKV / 4u) + head * HD4 + d]; }

    var m = NEG_BIG;
    var s = 0.0;
    var acc: array<vec4<f32>, HD4>;
    for (var j = l; j < keys; j += LANES) {
        let row = (kv * CTX + j) * HD4;
        var lanes = vec4<f32>(0.0);
        for (var d = 0u; d < HD4; d++) { lanes += query[d] * k_cache[row + d]; }
        let score = ((lanes.x + lanes.y) + (lanes.z + lanes.w)) * SCALE;
        let m_new = max(m, score);
        let correction = exp(m - m_new);
        let p = exp(score - m_new);
        s = s * correction + p;
        for (var d = 0u; d < HD4; d++) { acc[d] = acc[d] * correction + p * v_cache[row + d]; }
        m = m_new;
    }
    // The merge: one invocation computes each shared scalar (the others would only repeat it).
    maxima[l] = m;
    workgroupBarrier();
    if (l == 0u) {
        var top = NEG_BIG;
        for (var i = 0u; i < LANES; i++) { top = max(top, maxima[i]); }
        merged_max = top;
    }
    workgroupBarrier();
    let weight = exp(m - merged_max);
    sums[l] = s * weight;
    for (var d = 0u; d < HD4; d++) { partial[l * HD4 + d] = acc[d] * weight; }
    workgroupBarrier();
    if (l == 0u) {
        var total = 0.0;
        for (var i = 0u; i < LANES; i++) { total += sums[i]; }
        merged_sum = total;
    }
    workgroupBarrier();
    for (var d = l; d < HD4; d += LANES) {
        var value = vec4<f32>(0.0);
        for (var i = 0u; i < LANES; i++) { value += partial[i * HD4 + d]; }
        out[(t * H + head) * HD4 + d] = value / merged_sum;
    }
}
