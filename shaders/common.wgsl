// common.wgsl — prepended to every kernel, after the generated constants block:
//   D (d_model), H (query heads), KVH (KV heads), HD (head dim), FFN, V (vocabulary),
//   CTX (KV cache rows), TMAX (max rows per call), EPS (RMSNorm epsilon), SCALE (1/sqrt(HD)),
//   RESAMPLE_FROM_TARGET (false; true only in the tests' deliberately wrong verifier).
// Params (uniform, written once per call): rows = T query rows, position = absolute position of row 0.

struct Params { rows: u32, position: u32, pad0: u32, pad1: u32 };

const NEG_BIG: f32 = -3.0e38;  // stands in for -inf (WGSL has no infinity literal)
