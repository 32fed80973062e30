// rope_kv.wgsl — rotary embedding on adjacent pairs and the KV cache write, at absolute positions, in one
// dispatch per layer.
// rope: f32 [CTX, HD/2, 2] = (cos, sin) of pos * theta^(-2i/HD), computed in f64 on the CPU.
// qkv: f32 [rows, QKV], QKV = H*HD + 2*KVH*HD: row t = q (H*HD) | k (KVH*HD) | v (KVH*HD), the projections'
//      output. Invocation (p, t) with p < H*HD/2 rotates q's pair p in place: (a, b) -> (a cos - b sin,
//      a sin + b cos); with p = H*HD/2 + j (j < KVH*HD/2) it rotates k's pair j and writes it, and v's pair
//      j unchanged, to cache row position + t of k_cache, v_cache: f32 [KVH, CTX, HD] (this layer).
// Dispatch: (ceil((H + KVH) * HD / 2 / 64), rows). Each pair is its own invocation: batch invariant.
// Rows past the committed length are simply overwritten by a later call (logical rollback).
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rope: array<f32>;
@group(0) @binding(2) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<f32>;

fn rotate(value: vec2<f32>, pos: u32, i: u32) -> vec2<f32> {
    let c = rope[(pos * (HD / 2u) + i) * 2u];
    let s = rope[(pos * (HD / 2u) + i) * 2u + 1u];
    return vec2<f32>(value.x * c - value.y * s, value.x * s + value.y * c);
}

@compute @workgroup_size(64)
fn rope_kv(@builtin(global_invocation_id) id: vec3<u32>) {
    let p = id.x;
    let t = id.y;
    let q_pairs = H * HD / 2u;
    if (p >= q_pairs + KVH * HD / 2u || t >= params.rows) { return; }
    let pos = params.position + t;
    if (p < q_pairs) {
        let at = t * QKV + 2u * p;
        let r = rotate(vec2<f32>(qkv[at], qkv[at + 1u]), pos, p % (HD / 2u));
        qkv[at] = r.x;
        qkv[at + 1u] = r.y;
        return;
    }
    let j = p - q_pairs;
    let head = j / (HD / 2u);
    let i = j % (HD / 2u);
    let k_at = t * QKV + H * HD + 2u * j;
    let v_at = k_at + KVH * HD;
    let dst = (head * CTX + pos) * HD + 2u * i;
    let r = rotate(vec2<f32>(qkv[k_at], qkv[k_at + 1u]), pos, i);
    k_cache[dst] = r.x;
    k_cache[dst + 1u] = r.y;
    v_cache[dst] = qkv[v_at];
    v_cache[dst + 1u] = qkv[v_at + 1u];
}
