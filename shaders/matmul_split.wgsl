// matmul_split.wgsl — y[t, n] (+)= sum_k x[t, k] * W[n, k] for t < rows, n < N; the "split" family, made for
// hardware GPUs: many workgroups, and neighbouring invocations read neighbouring weight blocks.
// W: the repacked layout of repack.wgsl (see matmul_columns.wgsl). x: f32 [rows, K] as vec4s; y: as in
// matmul_columns.wgsl (row stride shape.y_stride, column 0 at shape.y_offset).
// Dispatch: (ceil(N / 8), 1, 1). Workgroup g owns columns 8g .. 8g + 7; invocation l = 8c + s takes column
// 8g + c and the K slice s: blocks s, s + 8, s + 16, ... (ascending), for every row.
// Reduction: the 8 slice sums of (t, column) are added in the fixed tree ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)).
// Batch invariance: a (t, column) result depends only on row t's activations and that fixed order; `rows`
// only bounds loops, so a row's result is bitwise identical for every T.
const SLICES: u32 = 8u;
// Pipeline-overridable: false -> y = x W^T; true -> y += x W^T (the residual adds). One entry point per format.
override ACCUMULATE: bool = false;
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<uniform> shape: Shape;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> quants: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

var<workgroup> partial: array<f32, TMAX * 64>;  // [t][c][s]

fn low_nibbles(w: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(w, w >> 8u, w >> 16u, w >> 24u) & vec4<u32>(15u)); }
fn high_nibbles(w: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(w >> 4u, w >> 12u, w >> 20u, w >> 28u) & vec4<u32>(15u)); }
fn int8s(w: u32) -> vec4<f32> {
    return vec4<f32>((vec4<i32>(bitcast<i32>(w << 24u), bitcast<i32>(w << 16u), bitcast<i32>(w << 8u), bitcast<i32>(w))) >> vec4<u32>(24u));
}

// A block's 32 weights as floats (element order), unpacked once and used for every row.
struct Block32 { a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>, e: vec4<f32>, f: vec4<f32>, g: vec4<f32>, h: vec4<f32> };
fn unpack_q4(q: vec4<u32>) -> Block32 {
    return Block32(low_nibbles(q.x), low_nibbles(q.y), low_nibbles(q.z), low_nibbles(q.w),
                   high_nibbles(q.x), high_nibbles(q.y), high_nibbles(q.z), high_nibbles(q.w));
}
fn unpack_q8(lo: vec4<u32>, hi: vec4<u32>) -> Block32 {
    return Block32(int8s(lo.x), int8s(lo.y), int8s(lo.z), int8s(lo.w), int8s(hi.x), int8s(hi.y), int8s(hi.z), int8s(hi.w));
}

// Row t's block b: (sum_j x_j w_j, sum_j x_j).
fn block_sums(t: u32, b: u32, w: Block32) -> vec2<f32> {
    let v = (t * shape.k + b * 32u) / 4u;
    let xa = x[v]; let xb = x[v + 1u]; let xc = x[v + 2u]; let xd = x[v + 3u];
    let xe = x[v + 4u]; let xf = x[v + 5u]; let xg = x[v + 6u]; let xh = x[v + 7u];
    let xq = dot(xa, w.a) + dot(xb, w.b) + dot(xc, w.c) + dot(xd, w.d) + dot(xe, w.e) + dot(xf, w.f) + dot(xg, w.g) + dot(xh, w.h);
    let sv = ((xa + xb) + (xc + xd)) + ((xe + xf) + (xg + xh));
    return vec2<f32>(xq, (sv.x + sv.y) + (sv.z + sv.w));
}

// Writes this invocation's slice sums to partial[t][c][s], then reduces and stores (t, column) pairs.
fn reduce_and_store(group: u32, l: u32, acc: ptr<function, array<f32, TMAX>>) {
    for (var t = 0u; t < params.rows; t++) { partial[t * 64u + l] = (*acc)[t]; }
    workgroupBarrier();
    for (var pair = l; pair < params.rows * 8u; pair += 64u) {
        let p = pair * SLICES;  // (t * 8 + c) * 8
        let sum = ((partial[p] + partial[p + 1u]) + (partial[p + 2u] + partial[p + 3u]))
                + ((partial[p + 4u] + partial[p + 5u]) + (partial[p + 6u] + partial[p + 7u]));
        let n = group * 8u + pair % 8u;
        if (n < shape.n) {
            let at = (pair / 8u) * shape.y_stride + shape.y_offset + n;
            y[at] = select(sum, y[at] + sum, ACCUMULATE);
        }
    }
}

fn split_q4_1(group: u32, l: u32) {
    let n = min(group * 8u + l / SLICES, shape.n - 1u);  // columns beyond N are computed on N - 1, never stored
    let blocks = shape.k / 32u;
    var acc: array<f32, TMAX>;
    for (var b = l % SLICES; b < blocks; b += SLICES) {
        let i = n * blocks + b;
        let w = unpack_q4(quants[i]);
        let dm = unpack2x16float(scales[i]);
        for (var t = 0u; t < params.rows; t++) {
            let sums = block_sums(t, b, w);
            acc[t] += dm.x * sums.x + dm.y * sums.y;
        }
    }
    reduce_and_store(group, l, &acc);
}

fn split_q8_0(group: u32, l: u32) {
    let n = min(group * 8u + l / SLICES, shape.n - 1u);
    let blocks = shape.k / 32u;
    var acc: array<f32, TMAX>;
    for (var b = l % SLICES; b < blocks; b += SLICES) {
        let i = n * blocks + b;
        let w = unpack_q8(quants[2u * i], quants[2u * i + 1u]);
        let d = unpack2x16float(scales[i]).x;
        for (var t = 0u; t < params.rows; t++) { acc[t] += d * block_sums(t, b, w).x; }
    }
    reduce_and_store(group, l, &acc);
}

@compute @workgroup_size(64)
fn matmul_q4_1(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_index) l: u32) { split_q4_1(g.x, l); }

@compute @workgroup_size(64)
fn matmul_q8_0(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_index) l: u32) { split_q8_0(g.x, l); }

