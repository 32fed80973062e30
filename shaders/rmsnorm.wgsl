// rmsnorm.wgsl — out[t, i] = x[t, i] / sqrt(mean_i(x[t, i]^2) + EPS) * weight[i], t < rows, i < D.
// Dispatch: (rows, 1, 1), one workgroup of 64 per row. Invocation l sums squares of i = l, l+64, ...
// (ascending), then a fixed pairwise tree combines the 64 partials: the order never depends on rows.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn rmsnorm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let t = wg.x;
    if (t >= params.rows) { return; }
    var s = 0.0;
    for (var i = l; i < D; i += 64u) {
        let v = x[t * D + i];
        s += v * v;
    }
    partial[l] = s;
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if (l < stride) { partial[l] += partial[l + stride]; }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(partial[0] / f32(D) + EPS);
    for (var i = l; i < D; i += 64u) {
        out[t * D + i] = x[t * D + i] * scale * weight[i];
    }
}
