// philox.wgsl — Philox4x32-10, bit-identical to pyodide_app/rng.py.
// counter = (round, position, domain, 0), key = (seed mod 2^32, seed >> 32).
// uniform24: u = ((word0 >> 8) + 1) / 2^24 in (0, 1], exact in f32.

fn mulhilo(a: u32, b: u32) -> vec2<u32> {  // (hi, lo) of the 64-bit product, from 16-bit halves
    let a_lo = a & 0xffffu;
    let a_hi = a >> 16u;
    let b_lo = b & 0xffffu;
    let b_hi = b >> 16u;
    let lo_lo = a_lo * b_lo;
    let hi_lo = a_hi * b_lo;
    let lo_hi = a_lo * b_hi;
    let hi_hi = a_hi * b_hi;
    let cross = (lo_lo >> 16u) + (hi_lo & 0xffffu) + (lo_hi & 0xffffu);
    let hi = hi_hi + (hi_lo >> 16u) + (lo_hi >> 16u) + (cross >> 16u);
    return vec2<u32>(hi, a * b);
}

fn philox(counter_in: vec4<u32>, key_in: vec2<u32>) -> vec4<u32> {
    var c = counter_in;
    var k = key_in;
    for (var round = 0u; round < 10u; round++) {
        if (round > 0u) {
            k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
        }
        let p0 = mulhilo(0xD2511F53u, c.x);
        let p1 = mulhilo(0xCD9E8D57u, c.z);
        c = vec4<u32>(p1.x ^ c.y ^ k.x, p1.y, p0.x ^ c.w ^ k.y, p0.y);
    }
    return c;
}

const DOMAIN_DRAFT: u32 = 1u;
const DOMAIN_ACCEPT: u32 = 2u;
const DOMAIN_CORRECTION: u32 = 3u;
const DOMAIN_TOKEN: u32 = 6u;  // counter (token index, 0, 6, 0): the champion's own sample of that token

fn uniform24(seed: vec2<u32>, domain: u32, round: u32, position: u32) -> f32 {
    let word = philox(vec4<u32>(round, position, domain, 0u), seed).x;
    return f32((word >> 8u) + 1u) / 16777216.0;
}
