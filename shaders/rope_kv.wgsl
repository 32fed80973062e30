// rope_kv.wgsl — rotary embedding on adjacent pairs and the KV cache write, at absolute positions.
// rope: f32 [CTX, HD/2, 2] = (cos, sin) of pos * theta^(-2i/HD), computed in f64 on the CPU.
// rope_q:   q: f32 [rows, H*HD], rotated in place: (a, b) -> (a cos - b sin, a sin + b cos).
// store_kv: k_new, v_new: f32 [rows, KVH*HD]; row t goes to cache row position + t:
//           k_cache, v_cache: f32 [KVH, CTX, HD] (this layer), k rotated, v copied.
// Dispatch: (ceil(pairs / 64), rows) with pairs = H*HD/2 (rope_q) or KVH*HD/2 (store_kv).
// Rows past the committed length are simply overwritten by a later call (logical rollback).
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rope: array<f32>;
@group(0) @binding(2) var<storage, read_write> a: array<f32>;      // q (rope_q) or k_new (store_kv)
@group(0) @binding(3) var<storage, read> v_new: array<f32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>;

fn rotate(value: vec2<f32>, pos: u32, i: u32) -> vec2<f32> {
    let c = rope[(pos * (HD / 2u) + i) * 2u];
    let s = rope[(pos * (HD / 2u) + i) * 2u + 1u];
    return vec2<f32>(value.x * c - value.y * s, value.x * s + value.y * c);
}

@compute @workgroup_size(64)
fn rope_q(@builtin(global_invocation_id) id: vec3<u32>) {
    let p = id.x;
    let t = id.y;
    if (p >= H * HD / 2u || t >= params.rows) { return; }
    let at = t * H * HD + 2u * p;
    let r = rotate(vec2<f32>(a[at], a[at + 1u]), params.position + t, p % (HD / 2u));
    a[at] = r.x;
    a[at + 1u] = r.y;
}

@compute @workgroup_size(64)
fn store_kv(@builtin(global_invocation_id) id: vec3<u32>) {
    let p = id.x;
    let t = id.y;
    if (p >= KVH * HD / 2u || t >= params.rows) { return; }
    let pos = params.position + t;
    let head = p / (HD / 2u);
    let i = p % (HD / 2u);
    let src = t * KVH * HD + 2u * p;
    let dst = (head * CTX + pos) * HD + 2u * i;
    let r = rotate(vec2<f32>(a[src], a[src + 1u]), pos, i);
    k_cache[dst] = r.x;
    k_cache[dst + 1u] = r.y;
    v_cache[dst] = v_new[src];
    v_cache[dst + 1u] = v_new[src + 1u];
}
