// embed.wgsl — x[t, i] = token_embd[tokens[t], i] for t < rows, i < D.
// token_embd: Q8_0, V rows of D values, in the repacked layout of repack.wgsl (block i = row * D/32 + b):
// quant words 8i .. 8i + 7 (32 int8, in order), scales[i] = f16 d; value d*q.
// Dispatch: (ceil(D / 64), rows). One invocation per output value: trivially batch invariant.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read> quants: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(64)
fn embed(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let t = id.y;
    if (i >= D || t >= params.rows) { return; }
    let block = tokens[t] * (D / 32u) + i / 32u;
    let d = unpack2x16float(scales[block]).x;
    let j = i % 32u;
    let word = quants[block * 8u + j / 4u];
    let q = f32(bitcast<i32>(word << (24u - 8u * (j % 4u))) >> 24u);
    x[t * D + i] = d * q;
}
