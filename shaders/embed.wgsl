// embed.wgsl — x[t, i] = token_embd[tokens[t], i] for t < rows, i < D.
// token_embd: Q8_0, V rows of D values (blocks of 34 bytes: f16 d, 32 x int8 q; value d*q), as u32 words.
// Dispatch: (ceil(D / 64), rows). One invocation per output value: trivially batch invariant.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read> table: array<u32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;

fn table_byte(offset: u32) -> u32 { return (table[offset >> 2u] >> ((offset & 3u) * 8u)) & 0xffu; }

@compute @workgroup_size(64)
fn embed(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let t = id.y;
    if (i >= D || t >= params.rows) { return; }
    let row = tokens[t] * (D / 32u) * 34u;
    let block = row + (i / 32u) * 34u;
    let word = table[block >> 2u];
    let half = select(word & 0xffffu, word >> 16u, (block & 2u) != 0u);
    let d = unpack2x16float(half).x;
    let q = f32((i32(table_byte(block + 2u + i % 32u)) << 24u) >> 24u);
    x[t * D + i] = d * q;
}
