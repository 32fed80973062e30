// repack.wgsl — GGUF blocks (as downloaded) -> the layout the matmul and embed kernels read. Runs once per
// tensor at load; copies bits, so the values are exactly the GGUF's.
// In:  raw: the tensor's GGUF bytes as u32 words (Q4_1: 20-byte blocks, Q8_0: 34-byte blocks), `blocks` of them.
// Out: quants: Q4_1: one vec4<u32> per block (its 16 nibble bytes as stored);
//              Q8_0: two vec4<u32> per block (its 32 int8 bytes as stored);
//      scales: one u32 per block: Q4_1: f16 d | f16 m << 16 (the block's first word); Q8_0: f16 d (low half).
// Block i (= row n * K/32 + block b) keeps index i in both outputs. Dispatch: (x, y) with x * y * 64 >= blocks;
// invocation i = (id.y * x + id.x).
@group(0) @binding(0) var<uniform> job: Repack;
@group(0) @binding(1) var<storage, read> raw: array<u32>;
@group(0) @binding(2) var<storage, read_write> quants: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> scales: array<u32>;

fn block_index(id: vec3<u32>) -> u32 { return id.y * job.groups_x * 64u + id.x; }

// The 4 bytes at an even byte offset (which may straddle two words).
fn raw_word_at(offset: u32) -> u32 {
    let word = raw[offset >> 2u];
    if ((offset & 2u) == 0u) { return word; }
    return (word >> 16u) | (raw[(offset >> 2u) + 1u] << 16u);
}

@compute @workgroup_size(64)
fn repack_q4_1(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = block_index(id);
    if (i >= job.blocks) { return; }
    let w = i * 5u;  // 20-byte blocks are word aligned
    scales[i] = raw[w];
    quants[i] = vec4<u32>(raw[w + 1u], raw[w + 2u], raw[w + 3u], raw[w + 4u]);
}

@compute @workgroup_size(64)
fn repack_q8_0(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = block_index(id);
    if (i >= job.blocks) { return; }
    let at = i * 34u;  // even
    scales[i] = raw_word_at(at) & 0xffffu;
    quants[2u * i] = vec4<u32>(raw_word_at(at + 2u), raw_word_at(at + 6u), raw_word_at(at + 10u), raw_word_at(at + 14u));
    quants[2u * i + 1u] = vec4<u32>(raw_word_at(at + 18u), raw_word_at(at + 22u), raw_word_at(at + 26u), raw_word_at(at + 30u));
}
