// matmul_columns.wgsl — y[t, n] (+)= sum_k x[t, k] * W[n, k] for t < rows, n < N; the "columns" family,
// made for CPU rasterisers (lavapipe, SwiftShader), where the cost is the number of load instructions.
// W: N rows of K values in the repacked layout of repack.wgsl (B = K/32 blocks per row, block i = n*B + b):
//   Q4_1: quants[i] (16 nibble bytes: element j < 16 = low nibble of byte j, j + 16 its high nibble),
//         scales[i] = f16 d | f16 m << 16; value d*q + m.
//   Q8_0: quants[2i], quants[2i + 1] (32 int8), scales[i] = f16 d; value d*q.
// x: f32 [rows, K] as vec4s, bound as a uniform buffer where it fits (one load serves every lane), else storage.
// y: f32 [rows, N]. Dispatch: (ceil(N / COLUMNS / 64), 1, 1).
// Each invocation owns COLUMNS = 8 adjacent columns for every row: a block's weights are loaded once for all
// rows, and each activation load serves 8 columns.
// Batch invariance: column n of row t is the sum over blocks b = 0, 1, ... (ascending) of that block's dot
// product, computed by the same expression for every t; `rows` is only a loop bound, so a row's result is
// bitwise identical for every T.
const COLUMNS: u32 = 8u;
struct Shape { k: u32, n: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<uniform> shape: Shape;
@group(0) @binding(2) ACTIVATIONS_DECLARATION
@group(0) @binding(3) var<storage, read> quants: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

// The 4 low (or high) nibbles of a word's 4 bytes, in byte order.
fn low_nibbles(w: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(w, w >> 8u, w >> 16u, w >> 24u) & vec4<u32>(15u)); }
fn high_nibbles(w: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(w >> 4u, w >> 12u, w >> 20u, w >> 28u) & vec4<u32>(15u)); }
// The 4 signed bytes of a word, in byte order.
fn int8s(w: u32) -> vec4<f32> {
    return vec4<f32>((vec4<i32>(bitcast<i32>(w << 24u), bitcast<i32>(w << 16u), bitcast<i32>(w << 8u), bitcast<i32>(w))) >> vec4<u32>(24u));
}

// One row's 32 activations of block b, as 8 vec4s.
struct Block32 { a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>, e: vec4<f32>, f: vec4<f32>, g: vec4<f32>, h: vec4<f32> };
fn activations(t: u32, b: u32) -> Block32 {
    let v = (t * shape.k + b * 32u) / 4u;
    return Block32(x[v], x[v + 1u], x[v + 2u], x[v + 3u], x[v + 4u], x[v + 5u], x[v + 6u], x[v + 7u]);
}

fn dot_q4(s: Block32, q: vec4<u32>) -> f32 {
    return dot(s.a, low_nibbles(q.x)) + dot(s.b, low_nibbles(q.y)) + dot(s.c, low_nibbles(q.z)) + dot(s.d, low_nibbles(q.w))
         + dot(s.e, high_nibbles(q.x)) + dot(s.f, high_nibbles(q.y)) + dot(s.g, high_nibbles(q.z)) + dot(s.h, high_nibbles(q.w));
}

fn dot_q8(s: Block32, lo: vec4<u32>, hi: vec4<u32>) -> f32 {
    return dot(s.a, int8s(lo.x)) + dot(s.b, int8s(lo.y)) + dot(s.c, int8s(lo.z)) + dot(s.d, int8s(lo.w))
         + dot(s.e, int8s(hi.x)) + dot(s.f, int8s(hi.y)) + dot(s.g, int8s(hi.z)) + dot(s.h, int8s(hi.w));
}

fn sum32(s: Block32) -> f32 {
    let v = ((s.a + s.b) + (s.c + s.d)) + ((s.e + s.f) + (s.g + s.h));
    return (v.x + v.y) + (v.z + v.w);
}

// Rows of a column beyond N read column N - 1 (never stored).
fn column_block(n0: u32, c: u32, b: u32) -> u32 { return min(n0 + c, shape.n - 1u) * (shape.k / 32u) + b; }

fn store(n0: u32, acc_lo: ptr<function, array<vec4<f32>, TMAX>>, acc_hi: ptr<function, array<vec4<f32>, TMAX>>, add: bool) {
    for (var t = 0u; t < params.rows; t++) {
        for (var c = 0u; c < COLUMNS; c++) {
            let n = n0 + c;
            if (n < shape.n) {
                let value = select((*acc_hi)[t][c - 4u], (*acc_lo)[t][c], c < 4u);
                let at = t * shape.n + n;
                y[at] = select(value, y[at] + value, add);
            }
        }
    }
}

fn columns_q4_1(n0: u32, add: bool) {
    var acc_lo: array<vec4<f32>, TMAX>;
    var acc_hi: array<vec4<f32>, TMAX>;
    for (var b = 0u; b < shape.k / 32u; b++) {
        let q0 = quants[column_block(n0, 0u, b)]; let q1 = quants[column_block(n0, 1u, b)];
        let q2 = quants[column_block(n0, 2u, b)]; let q3 = quants[column_block(n0, 3u, b)];
        let q4 = quants[column_block(n0, 4u, b)]; let q5 = quants[column_block(n0, 5u, b)];
        let q6 = quants[column_block(n0, 6u, b)]; let q7 = quants[column_block(n0, 7u, b)];
        let s0 = unpack2x16float(scales[column_block(n0, 0u, b)]); let s1 = unpack2x16float(scales[column_block(n0, 1u, b)]);
        let s2 = unpack2x16float(scales[column_block(n0, 2u, b)]); let s3 = unpack2x16float(scales[column_block(n0, 3u, b)]);
        let s4 = unpack2x16float(scales[column_block(n0, 4u, b)]); let s5 = unpack2x16float(scales[column_block(n0, 5u, b)]);
        let s6 = unpack2x16float(scales[column_block(n0, 6u, b)]); let s7 = unpack2x16float(scales[column_block(n0, 7u, b)]);
        let d_lo = vec4<f32>(s0.x, s1.x, s2.x, s3.x); let m_lo = vec4<f32>(s0.y, s1.y, s2.y, s3.y);
        let d_hi = vec4<f32>(s4.x, s5.x, s6.x, s7.x); let m_hi = vec4<f32>(s4.y, s5.y, s6.y, s7.y);
        for (var t = 0u; t < params.rows; t++) {
            let s = activations(t, b);
            let xs = vec4<f32>(sum32(s));
            acc_lo[t] += d_lo * vec4<f32>(dot_q4(s, q0), dot_q4(s, q1), dot_q4(s, q2), dot_q4(s, q3)) + m_lo * xs;
            acc_hi[t] += d_hi * vec4<f32>(dot_q4(s, q4), dot_q4(s, q5), dot_q4(s, q6), dot_q4(s, q7)) + m_hi * xs;
        }
    }
    store(n0, &acc_lo, &acc_hi, add);
}

fn columns_q8_0(n0: u32, add: bool) {
    var acc_lo: array<vec4<f32>, TMAX>;
    var acc_hi: array<vec4<f32>, TMAX>;
    for (var b = 0u; b < shape.k / 32u; b++) {
        let i0 = column_block(n0, 0u, b); let i1 = column_block(n0, 1u, b); let i2 = column_block(n0, 2u, b);
        let i3 = column_block(n0, 3u, b); let i4 = column_block(n0, 4u, b); let i5 = column_block(n0, 5u, b);
        let i6 = column_block(n0, 6u, b); let i7 = column_block(n0, 7u, b);
        let q0l = quants[2u * i0]; let q0h = quants[2u * i0 + 1u]; let q1l = quants[2u * i1]; let q1h = quants[2u * i1 + 1u];
        let q2l = quants[2u * i2]; let q2h = quants[2u * i2 + 1u]; let q3l = quants[2u * i3]; let q3h = quants[2u * i3 + 1u];
        let q4l = quants[2u * i4]; let q4h = quants[2u * i4 + 1u]; let q5l = quants[2u * i5]; let q5h = quants[2u * i5 + 1u];
        let q6l = quants[2u * i6]; let q6h = quants[2u * i6 + 1u]; let q7l = quants[2u * i7]; let q7h = quants[2u * i7 + 1u];
        let d_lo = vec4<f32>(unpack2x16float(scales[i0]).x, unpack2x16float(scales[i1]).x, unpack2x16float(scales[i2]).x, unpack2x16float(scales[i3]).x);
        let d_hi = vec4<f32>(unpack2x16float(scales[i4]).x, unpack2x16float(scales[i5]).x, unpack2x16float(scales[i6]).x, unpack2x16float(scales[i7]).x);
        for (var t = 0u; t < params.rows; t++) {
            let s = activations(t, b);
            acc_lo[t] += d_lo * vec4<f32>(dot_q8(s, q0l, q0h), dot_q8(s, q1l, q1h), dot_q8(s, q2l, q2h), dot_q8(s, q3l, q3h));
            acc_hi[t] += d_hi * vec4<f32>(dot_q8(s, q4l, q4h), dot_q8(s, q5l, q5h), dot_q8(s, q6l, q6h), dot_q8(s, q7l, q7h));
        }
    }
    store(n0, &acc_lo, &acc_hi, add);
}

@compute @workgroup_size(64)
fn matmul_q4_1(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x * COLUMNS >= shape.n) { return; }
    columns_q4_1(id.x * COLUMNS, false);
}

@compute @workgroup_size(64)
fn matmul_q4_1_add(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x * COLUMNS >= shape.n) { return; }
    columns_q4_1(id.x * COLUMNS, true);
}

@compute @workgroup_size(64)
fn matmul_q8_0(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x * COLUMNS >= shape.n) { return; }
    columns_q8_0(id.x * COLUMNS, false);
}

@compute @workgroup_size(64)
fn matmul_q8_0_add(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x * COLUMNS >= shape.n) { return; }
    columns_q8_0(id.x * COLUMNS, true);
}
