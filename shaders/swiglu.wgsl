// swiglu.wgsl — gate[t, i] = silu(gate[t, i]) * up[t, i] with silu(g) = g / (1 + exp(-g)); t < rows, i < FFN.
// Dispatch: (ceil(FFN / 64), rows). Elementwise, trivially batch invariant.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;

@compute @workgroup_size(64)
fn swiglu(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let t = id.y;
    if (i >= FFN || t >= params.rows) { return; }
    let g = gate[t * FFN + i];
    gate[t * FFN + i] = g / (1.0 + exp(-g)) * up[t * FFN + i];
}
