// swiglu.wgsl — act[t, i] = silu(gate[t, i]) * up[t, i] with silu(g) = g / (1 + exp(-g)); t < rows, i < FFN.
// gate_up: f32 [rows, 2*FFN], row t = gate (FFN) | up (FFN), the projections' output; act: f32 [rows, FFN].
// Dispatch: (ceil(FFN / 64), rows). Elementwise, trivially batch invariant.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> gate_up: array<f32>;
@group(0) @binding(2) var<storage, read_write> act: array<f32>;

@compute @workgroup_size(64)
fn swiglu(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let t = id.y;
    if (i >= FFN || t >= params.rows) { return; }
    let g = gate_up[t * 2u * FFN + i];
    act[t * FFN + i] = g / (1.0 + exp(-g)) * gate_up[t * 2u * FFN + FFN + i];
}
