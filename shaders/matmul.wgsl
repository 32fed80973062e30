// matmul.wgsl — y[t, n] = sum_k x[t, k] * W[n, k]   (the *_add entries: y[t, n] += ...), t < rows, n < N.
// W: N rows of K values in GGUF blocks of 32, as u32 words (tensor start 256-byte aligned):
//   Q4_1: 20 bytes = f16 d, f16 m, 16 bytes of nibbles; element j < 16 = low nibble of byte j,
//         element j + 16 = its high nibble; value d*q + m.      Row = K/32 * 20 bytes (u32 aligned).
//   Q8_0: 34 bytes = f16 d, 32 x int8; value d*q.             Blocks start at even byte offsets.
// x: f32 [rows, K]; y: f32 [rows, N]. Dispatch: (ceil(N / 64), 1, 1).
// Batch invariance: invocation n owns column n for every row; it walks the blocks in ascending k and
// adds each block's dot product (elements in a fixed order) to acc[t]. Nothing depends on `rows`, so
// a row's result is bitwise identical for every T. The weight block is decoded once for all rows.
struct Shape { k: u32, n: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<uniform> shape: Shape;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

fn w_byte(offset: u32) -> u32 { return (w[offset >> 2u] >> ((offset & 3u) * 8u)) & 0xffu; }
fn w_f16(offset: u32) -> f32 {  // offset is even
    let word = w[offset >> 2u];
    return unpack2x16float(select(word & 0xffffu, word >> 16u, (offset & 2u) != 0u)).x;
}

// acc[t] = sum over blocks of (d * sum_j x*q + m * sum_j x); returns nothing, fills acc.
fn column_q4_1(n: u32, acc: ptr<function, array<f32, TMAX>>) {
    let blocks = shape.k / 32u;
    var q: array<f32, 32>;
    for (var b = 0u; b < blocks; b++) {
        let base = (n * blocks + b) * 20u;
        let dm = unpack2x16float(w[base >> 2u]);
        for (var j = 0u; j < 16u; j++) {
            let byte = w_byte(base + 4u + j);
            q[j] = f32(byte & 15u);
            q[j + 16u] = f32(byte >> 4u);
        }
        for (var t = 0u; t < params.rows; t++) {
            let row = t * shape.k + b * 32u;
            var xq = 0.0;
            var xs = 0.0;
            for (var j = 0u; j < 32u; j++) {
                let v = x[row + j];
                xq += v * q[j];
                xs += v;
            }
            (*acc)[t] += dm.x * xq + dm.y * xs;
        }
    }
}

fn column_q8_0(n: u32, acc: ptr<function, array<f32, TMAX>>) {
    let blocks = shape.k / 32u;
    var q: array<f32, 32>;
    for (var b = 0u; b < blocks; b++) {
        let base = (n * blocks + b) * 34u;
        let d = w_f16(base);
        for (var j = 0u; j < 32u; j++) {
            q[j] = f32((i32(w_byte(base + 2u + j)) << 24u) >> 24u);
        }
        for (var t = 0u; t < params.rows; t++) {
            let row = t * shape.k + b * 32u;
            var xq = 0.0;
            for (var j = 0u; j < 32u; j++) {
                xq += x[row + j] * q[j];
            }
            (*acc)[t] += d * xq;
        }
    }
}

fn store(n: u32, acc: ptr<function, array<f32, TMAX>>, add: bool) {
    for (var t = 0u; t < params.rows; t++) {
        let at = t * shape.n + n;
        y[at] = select((*acc)[t], y[at] + (*acc)[t], add);
    }
}

@compute @workgroup_size(64)
fn matmul_q4_1(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= shape.n) { return; }
    var acc: array<f32, TMAX>;
    column_q4_1(id.x, &acc);
    store(id.x, &acc, false);
}

@compute @workgroup_size(64)
fn matmul_q4_1_add(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= shape.n) { return; }
    var acc: array<f32, TMAX>;
    column_q4_1(id.x, &acc);
    store(id.x, &acc, true);
}

@compute @workgroup_size(64)
fn matmul_q8_0(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= shape.n) { return; }
    var acc: array<f32, TMAX>;
    column_q8_0(id.x, &acc);
    store(id.x, &acc, false);
}

@compute @workgroup_size(64)
fn matmul_q8_0_add(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= shape.n) { return; }
    var acc: array<f32, TMAX>;
    column_q8_0(id.x, &acc);
    store(id.x, &acc, true);
}
