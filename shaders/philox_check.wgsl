// philox_check.wgsl — the self-test's Philox known answers: words[i] = philox(counter i, key i), computed by the
// same philox() the verify kernel draws with. Needs philox.wgsl. Dispatch (1, 1, 1).
// cases: per case two vec4s, the counter, then (key.x, key.y, 0, 0). words: one vec4 per case.
@group(0) @binding(0) var<storage, read> cases: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> words: array<vec4<u32>>;

@compute @workgroup_size(1)
fn philox_check() {
    for (var i = 0u; i < arrayLength(&words); i++) {
        words[i] = philox(cases[2u * i], cases[2u * i + 1u].xy);
    }
}
