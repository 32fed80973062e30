// common.wgsl — prepended to every kernel, after the generated constants block:
//   D (d_model), H (query heads), KVH (KV heads), HD (head dim), FFN, V (vocabulary),
//   CTX (KV cache rows), TMAX (max rows per call), EPS (RMSNorm epsilon), SCALE (1/sqrt(HD)),
//   RESAMPLE_FROM_TARGET (false; true only in the tests' deliberately wrong verifier).
// The structs the kernels share with Python (Params, Shape, Repack, Verify, VerifyResult) and the codes
// DRAFT_*, RESULT_*, STATUS_* come before it too, generated from pyodide_app/kernel_abi.py.

const NEG_BIG: f32 = -3.0e38;  // stands in for -inf (WGSL has no infinity literal)
