// matmul_columns.wgsl — y[t, n] (+)= sum_k x[t, k] * W[n, k] for t < rows, n < N; the "columns" family,
// made for CPU rasterisers (lavapipe, SwiftShader), where the cost is the number of load instructions.
// W: N rows of K values in the repacked layout of repack.wgsl (B = K/32 blocks per row, block i = n*B + b):
//   Q4_1: quants[i] (16 nibble bytes: element j < 16 = low nibble of byte j, j + 16 its high nibble),
//         scales[i] = f16 d | f16 m << 16; value d*q + m.
//   Q8_0: quants[2i], quants[2i + 1] (32 int8), scales[i] = f16 d; value d*q.
// x: f32 [rows, K] as vec4s, bound as a uniform buffer where it fits (one load serves every lane), else storage.
// y: f32 rows of shape.y_stride elements; column n of row t at t * y_stride + y_offset + n (a shared buffer).
// Dispatch: (ceil(N / COLUMNS / MATMUL_WORKGROUP), 1, 1); MATMUL_WORKGROUP is prepended by the host (32: a CPU
// rasteriser runs each workgroup on one thread, and N = 576 is 72 invocations).
// Each invocation owns COLUMNS = 8 adjacent columns for every row: a block's weights are loaded and unpacked
// to floats once for all rows, and each activation load serves 8 columns.
// Batch invariance: column n of row t is the sum over blocks b = 0, 1, ... (ascending) of that block's dot
// product, computed by the same expression for every t; `rows` is only a loop bound, so a row's result is
// bitwise identical for every T.
const COLUMNS: u32 = 8u;
// Pipeline-overridable: false -> y = x W^T; true -> y += x W^T (the residual adds). One entry point per format.
override ACCUMULATE: bool = false;
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<uniform> shape: Shape;
@group(0) @binding(2) ACTIVATIONS_DECLARATION
@group(0) @binding(3) var<storage, read> quants: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

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

// A block's 32 weights as floats, in element order (unpacked once per block, used for every row), each
// left where it sits in its word: element j < 16 is q * 2^(8 (j % 4)), element j + 16 is q * 2^(4 + 8 (j % 4))
// (masks only, no shifts; exact in f32). scaled() gives the activations the inverse powers of two, so every
// product (q * 2^e) * (x * 2^-e) is exactly q * x.
const LOW_MASKS: vec4<u32> = vec4<u32>(0xfu, 0xf00u, 0xf0000u, 0xf000000u);
const HIGH_MASKS: vec4<u32> = vec4<u32>(0xf0u, 0xf000u, 0xf00000u, 0xf0000000u);
const LOW_SCALES: vec4<f32> = vec4<f32>(1.0, 0.00390625, 1.52587890625e-05, 5.9604644775390625e-08);
const HIGH_SCALES: vec4<f32> = vec4<f32>(0.0625, 0.000244140625, 9.5367431640625e-07, 3.725290298461914e-09);
fn unpack_q4(q: vec4<u32>) -> Block32 {
    return Block32(vec4<f32>(vec4<u32>(q.x) & LOW_MASKS), vec4<f32>(vec4<u32>(q.y) & LOW_MASKS),
                   vec4<f32>(vec4<u32>(q.z) & LOW_MASKS), vec4<f32>(vec4<u32>(q.w) & LOW_MASKS),
                   vec4<f32>(vec4<u32>(q.x) & HIGH_MASKS), vec4<f32>(vec4<u32>(q.y) & HIGH_MASKS),
                   vec4<f32>(vec4<u32>(q.z) & HIGH_MASKS), vec4<f32>(vec4<u32>(q.w) & HIGH_MASKS));
}
fn scaled(s: Block32) -> Block32 {
    return Block32(s.a * LOW_SCALES, s.b * LOW_SCALES, s.c * LOW_SCALES, s.d * LOW_SCALES,
                   s.e * HIGH_SCALES, s.f * HIGH_SCALES, s.g * HIGH_SCALES, s.h * HIGH_SCALES);
}

fn dot32(s: Block32, w: Block32) -> f32 {
    return dot(s.a, w.a) + dot(s.b, w.b) + dot(s.c, w.c) + dot(s.d, w.d) + dot(s.e, w.e) + dot(s.f, w.f) + dot(s.g, w.g) + dot(s.h, w.h);
}

fn unpack_q8(lo: vec4<u32>, hi: vec4<u32>) -> Block32 {
    return Block32(int8s(lo.x), int8s(lo.y), int8s(lo.z), int8s(lo.w), int8s(hi.x), int8s(hi.y), int8s(hi.z), int8s(hi.w));
}

fn sum32(s: Block32) -> f32 {
    let v = ((s.a + s.b) + (s.c + s.d)) + ((s.e + s.f) + (s.g + s.h));
    return (v.x + v.y) + (v.z + v.w);
}

// Rows of a column beyond N read column N - 1 (never stored).
fn column_block(n0: u32, c: u32, b: u32) -> u32 { return min(n0 + c, shape.n - 1u) * (shape.k / 32u) + b; }

fn store(n0: u32, acc_lo: ptr<function, array<vec4<f32>, TMAX>>, acc_hi: ptr<function, array<vec4<f32>, TMAX>>) {
    for (var t = 0u; t < params.rows; t++) {
        for (var c = 0u; c < COLUMNS; c++) {
            let n = n0 + c;
            if (n < shape.n) {
                let value = select((*acc_hi)[t][c - 4u], (*acc_lo)[t][c], c < 4u);
                let at = t * shape.y_stride + shape.y_offset + n;
                y[at] = select(value, y[at] + value, ACCUMULATE);
            }
        }
    }
}

fn columns_q4_1(n0: u32) {
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
        let u0 = unpack_q4(q0); let u1 = unpack_q4(q1); let u2 = unpack_q4(q2); let u3 = unpack_q4(q3);
        let u4 = unpack_q4(q4); let u5 = unpack_q4(q5); let u6 = unpack_q4(q6); let u7 = unpack_q4(q7);
        for (var t = 0u; t < params.rows; t++) {
            let s = activations(t, b);
            let xs = vec4<f32>(sum32(s));
            let z = scaled(s);
            acc_lo[t] += d_lo * vec4<f32>(dot32(z, u0), dot32(z, u1), dot32(z, u2), dot32(z, u3)) + m_lo * xs;
            acc_hi[t] += d_hi * vec4<f32>(dot32(z, u4), dot32(z, u5), dot32(z, u6), dot32(z, u7)) + m_hi * xs;
        }
    }
    store(n0, &acc_lo, &acc_hi);
}

fn columns_q8_0(n0: u32) {
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
        let u0 = unpack_q8(q0l, q0h); let u1 = unpack_q8(q1l, q1h); let u2 = unpack_q8(q2l, q2h); let u3 = unpack_q8(q3l, q3h);
        let u4 = unpack_q8(q4l, q4h); let u5 = unpack_q8(q5l, q5h); let u6 = unpack_q8(q6l, q6h); let u7 = unpack_q8(q7l, q7h);
        for (var t = 0u; t < params.rows; t++) {
            let s = activations(t, b);
            acc_lo[t] += d_lo * vec4<f32>(dot32(s, u0), dot32(s, u1), dot32(s, u2), dot32(s, u3));
            acc_hi[t] += d_hi * vec4<f32>(dot32(s, u4), dot32(s, u5), dot32(s, u6), dot32(s, u7));
        }
    }
    store(n0, &acc_lo, &acc_hi);
}

@compute @workgroup_size(MATMUL_WORKGROUP)
fn matmul_q4_1(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x * COLUMNS >= shape.n) { return; }
    columns_q4_1(id.x * COLUMNS);
}

@compute @workgroup_size(MATMUL_WORKGROUP)
fn matmul_q8_0(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x * COLUMNS >= shape.n) { return; }
    columns_q8_0(id.x * COLUMNS);
}
