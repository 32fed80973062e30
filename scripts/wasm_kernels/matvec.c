// Exact-weight matmul kernels for the CPU champion, wasm32 + simd128 (no relaxed SIMD: its results may
// differ between machines). y[t][j] = sum_i w[j][i] * x[t][i] for T rows; every row is computed in the
// same order whatever T is (batch-invariant by construction). Built freestanding (no libc):
//   python -m ziglang cc --target=wasm32-freestanding -O3 -msimd128 -nostdlib -rdynamic -Wl,--no-entry
//       -Wl,--import-memory -o matvec.wasm matvec.c          (pip install ziglang)
// Shapes: w [n][k] (GGUF order, out x in); x [T][k]; y [T][n]; k a multiple of 32.
#include <wasm_simd128.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
#define EXPORT __attribute__((visibility("default")))

static float half_to_float(u16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    bits = exp == 31 ? sign | 0x7f800000 | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
    return __builtin_bit_cast(float, bits);
}

static float hsum(v128_t v) {  // fixed order: (l0 + l1) + (l2 + l3)
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1)) +
           (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}

// Dense float32 weights (what the float32 ONNX graph multiplies): 4 lanes, one accumulator per row.
EXPORT void dense_matvec(const float *w, const float *x, float *y, int n, int k, int T) {
    for (int j = 0; j < n; j++) {
        const float *row = w + (long)j * k;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (long)t * k;
            v128_t acc = wasm_f32x4_splat(0.0f);
            for (int i = 0; i < k; i += 4)
                acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_load(row + i), wasm_v128_load(xt + i)));
            y[(long)t * n + j] = hsum(acc);
        }
    }
}

// Q4_1 blocks of 32: f16 d, f16 m, 16 bytes (byte b: element b in the low nibble, b + 16 in the high).
// Each weight is d*q + m in f32 (d*q is exact: 11 x 4 bits), then multiplied with x: the GGUF's values.
static inline void q4_1_weights(const u8 *block, v128_t out[8]) {
    float d = half_to_float(block[0] | block[1] << 8), m = half_to_float(block[2] | block[3] << 8);
    v128_t vd = wasm_f32x4_splat(d), vm = wasm_f32x4_splat(m);
    v128_t q = wasm_v128_load(block + 4);
    v128_t lo = wasm_v128_and(q, wasm_i8x16_splat(0x0f)), hi = wasm_u8x16_shr(q, 4);
    v128_t halves[4] = {wasm_u16x8_extend_low_u8x16(lo), wasm_u16x8_extend_high_u8x16(lo),
                        wasm_u16x8_extend_low_u8x16(hi), wasm_u16x8_extend_high_u8x16(hi)};
    for (int h = 0; h < 4; h++) {
        v128_t a = wasm_f32x4_convert_u32x4(wasm_u32x4_extend_low_u16x8(halves[h]));
        v128_t b = wasm_f32x4_convert_u32x4(wasm_u32x4_extend_high_u16x8(halves[h]));
        out[2 * h] = wasm_f32x4_add(wasm_f32x4_mul(a, vd), vm);
        out[2 * h + 1] = wasm_f32x4_add(wasm_f32x4_mul(b, vd), vm);
    }
}

// Exact weights, unpacked once per block for all T rows (rows in groups of 4 kept in registers).
EXPORT void q4_1_matvec(const u8 *w, const float *x, float *y, int n, int k, int T) {
    int blocks = k / 32;
    for (int j = 0; j < n; j++) {
        const u8 *row = w + (long)j * blocks * 20;
        for (int t0 = 0; t0 < T; t0 += 4) {
            int rows = T - t0 < 4 ? T - t0 : 4;
            v128_t acc[4] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f),
                             wasm_f32x4_splat(0.0f)};
            for (int b = 0; b < blocks; b++) {
                v128_t wv[8];
                q4_1_weights(row + b * 20, wv);
                for (int r = 0; r < rows; r++) {
                    const float *xt = x + (long)(t0 + r) * k + b * 32;
                    for (int v = 0; v < 8; v++)
                        acc[r] = wasm_f32x4_add(acc[r], wasm_f32x4_mul(wv[v], wasm_v128_load(xt + 4 * v)));
                }
            }
            for (int r = 0; r < rows; r++) y[(long)(t0 + r) * n + j] = hsum(acc[r]);
        }
    }
}

// Factored: sum (d q + m) x = d * sum(q x) + m * sum(x) per block (other rounding than the exact
// weights; xsum[t][b] = sum of x over block b, computed once per input row by the caller).
EXPORT void q4_1_matvec_factored(const u8 *w, const float *x, const float *xsum, float *y, int n, int k, int T) {
    int blocks = k / 32;
    for (int j = 0; j < n; j++) {
        const u8 *row = w + (long)j * blocks * 20;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (long)t * k;
            float total = 0.0f;
            for (int b = 0; b < blocks; b++) {
                const u8 *block = row + b * 20;
                float d = half_to_float(block[0] | block[1] << 8), m = half_to_float(block[2] | block[3] << 8);
                v128_t q = wasm_v128_load(block + 4);
                v128_t lo = wasm_v128_and(q, wasm_i8x16_splat(0x0f)), hi = wasm_u8x16_shr(q, 4);
                v128_t halves[4] = {wasm_u16x8_extend_low_u8x16(lo), wasm_u16x8_extend_high_u8x16(lo),
                                    wasm_u16x8_extend_low_u8x16(hi), wasm_u16x8_extend_high_u8x16(hi)};
                v128_t acc = wasm_f32x4_splat(0.0f);
                for (int h = 0; h < 4; h++) {
                    v128_t a = wasm_f32x4_convert_u32x4(wasm_u32x4_extend_low_u16x8(halves[h]));
                    v128_t c = wasm_f32x4_convert_u32x4(wasm_u32x4_extend_high_u16x8(halves[h]));
                    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(a, wasm_v128_load(xt + b * 32 + 8 * h)));
                    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(c, wasm_v128_load(xt + b * 32 + 8 * h + 4)));
                }
                total += d * hsum(acc) + m * xsum[t * blocks + b];
            }
            y[(long)t * n + j] = total;
        }
    }
}
