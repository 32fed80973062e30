"""The WGSL champion runtime: a package's weights on the GPU, buffers sized once for T_max rows.

Every buffer is allocated at load time for T_max = k_max + 1 query rows and
`capacity` KV rows; k then varies per round without reallocation. The
dispatch plan (pipelines, bind groups, workgroup counts) for each row count
T is built once and replayed: a forward pass is one uniform write (T and the
position of row 0), one token write and one submit.

KV cache (replay_frontier): a call with T tokens at position c writes cache
rows c..c+T-1 and row t attends to rows 0..c+t. Rows beyond the committed
length hold whatever a rejected draft left there and are overwritten before
they are ever read, so rollback is just passing the committed length.
"""

from __future__ import annotations

import itertools
import math
import time
from array import array
from typing import Callable, Sequence

from .acceptance import FLOAT_RESIDUAL_FLOOR, Decision, FullRow, PointMass, ReducedRow
from .champion import CachedPrefix, VerifyRequest, common_prefix
from .errors import DeviceError, DraftNumericError, ResidualMassError, TargetNumericError
from .gpu import Binding, Dispatch, GPUDevice, check_limits
from .gpu_weights import FUSED_PROJECTIONS, WeightUploader, byte_range, fuse_projections, largest_binding
from .kernel_abi import (
    PARAMS,
    RESULT_BYTES,
    SHAPE,
    VERIFY,
    VERIFY_RESULT,
    DraftKind,
    ResultKind,
    Status,
    wgsl_declarations,
)
from .manifest import ModelConfig
from .sampling import SeededDraws

SHADER_FILES = ("common", "embed", "rmsnorm", "rope_kv", "swiglu")
# Matmul kernel families (shaders/matmul_<family>.wgsl), all batch invariant; one is chosen per adapter.
# columns: 8 columns per invocation, activations as a uniform buffer where they fit (CPU rasterisers).
# split: a workgroup per 8 columns, K split 8 ways, fixed-order reduction (hardware GPUs).
KERNEL_FAMILIES = ("columns", "split")
# Matmul pipelines: one entry point per weight format, each compiled plain and accumulating (ACCUMULATE).
MATMUL_VARIANTS = {  # pipeline name -> (entry point, override constants)
    "matmul_q4_1": ("matmul_q4_1", {"ACCUMULATE": False}),
    "matmul_q4_1_add": ("matmul_q4_1", {"ACCUMULATE": True}),
    "matmul_q8_0": ("matmul_q8_0", {"ACCUMULATE": False}),
    "matmul_q8_0_add": ("matmul_q8_0", {"ACCUMULATE": True}),
}
COLUMNS_PER_INVOCATION = 8
COLUMNS_PER_SPLIT_GROUP = 8
COLUMNS_WORKGROUP = 32  # invocations per workgroup of the columns family (see matmul_columns.wgsl)
# attention.wgsl: invocations (LANES) per (head, row) workgroup, per family. A CPU rasteriser runs a
# workgroup on one thread, 8 lanes at a time, so more lanes add merge work and no parallelism; a hardware
# GPU spreads a long context's keys over 64.
ATTENTION_LANES = {"columns": 8, "split": 64}
PREFILL_ROWS = 64  # rows per prefill forward (its own matmul pipelines and scratch, no LM head)
VERIFY_SHADERS = ("philox", "verify")
RESULT_KINDS = {ResultKind.SAMPLE: "sample", ResultKind.BONUS: "bonus", ResultKind.CORRECTION: "correction"}
RESULT_ERRORS = {
    Status.TARGET_NUMERIC: TargetNumericError,
    Status.RESIDUAL_MASS: ResidualMassError,
    Status.DRAFT_NUMERIC: DraftNumericError,
}
DRAFT_KINDS = {FullRow: DraftKind.FULL_ROWS, ReducedRow: DraftKind.REDUCED_ROWS, PointMass: DraftKind.POINT_MASSES}
WORKGROUP = 64


def groups(count: int, size: int = WORKGROUP) -> int:
    """Workgroups of `size` invocations that cover `count` invocations."""
    return (count + size - 1) // size


def qkv_width(config: ModelConfig) -> int:
    """Floats in a row of the q|k|v projections' output (H*HD + 2*KVH*HD)."""
    return (config.n_heads + 2 * config.n_kv_heads) * config.head_dim


def constants_header(config: ModelConfig, capacity: int, t_max: int, negative_control: bool = False) -> str:
    values = {
        "D": config.d_model,
        "H": config.n_heads,
        "KVH": config.n_kv_heads,
        "HD": config.head_dim,
        "FFN": config.d_ffn,
        "V": config.vocab_size,
        "CTX": capacity,
        "TMAX": t_max,
        "QKV": qkv_width(config),
    }
    lines = [f"const {name}: u32 = {value}u;" for name, value in values.items()]
    lines.append(f"const EPS: f32 = {config.rms_eps!r};")
    lines.append(f"const SCALE: f32 = {1.0 / math.sqrt(config.head_dim)!r};")
    lines.append(f"const RESAMPLE_FROM_TARGET: bool = {'true' if negative_control else 'false'};")
    lines.append(f"const RESIDUAL_FLOOR: f32 = {FLOAT_RESIDUAL_FLOOR!r};")
    return "\n".join(lines) + "\n" + wgsl_declarations()


def matmul_source(source: str, uniform_vec4s: int | None, workgroup: int) -> str:
    """A matmul kernel file with its activations declared: a uniform array of `uniform_vec4s` vec4s
    (one load serves every lane; needs T_max * K * 4 bytes within the uniform binding limit), or storage;
    workgroup: invocations per workgroup of the columns family (MATMUL_WORKGROUP)."""
    source = f"const MATMUL_WORKGROUP: u32 = {workgroup}u;\n" + source
    if uniform_vec4s:
        declaration = f"var<uniform> x: array<vec4<f32>, {uniform_vec4s}>;"
    else:
        declaration = "var<storage, read> x: array<vec4<f32>>;"
    return source.replace("ACTIVATIONS_DECLARATION", declaration)


def attention_source(source: str, lanes: int) -> str:
    """attention.wgsl with LANES invocations per (head, row) workgroup."""
    return f"const LANES: u32 = {lanes}u;\n" + source


def rope_table(config: ModelConfig, capacity: int) -> bytes:
    """(cos, sin) of pos * theta^(-2i/head_dim), computed in f64, stored f32 [capacity, head_dim/2, 2]."""
    half = config.head_dim // 2
    inv_freq = [config.rope_theta ** (-2.0 * i / config.head_dim) for i in range(half)]
    values = array("f")
    for pos in range(capacity):
        for f in inv_freq:
            values.append(math.cos(pos * f))
            values.append(math.sin(pos * f))
    return values.tobytes()


class GPUChampion:
    def __init__(
        self,
        gpu: GPUDevice,
        manifest: dict,
        read_file: Callable[[str], bytes],
        shader_source: Callable[[str], str],
        k_max: int = 8,
        context_limit: int | None = None,
        negative_control: bool = False,
        progress: Callable[[int, int], None] | None = None,
        kernels: str = "auto",
        prefill_rows: int = PREFILL_ROWS,
        columns_workgroup: int = COLUMNS_WORKGROUP,
    ):
        """progress(bytes_uploaded, total): called after each weight tensor reaches the GPU.
        kernels: a matmul family of KERNEL_FAMILIES, or "auto" (time each at load, keep the fastest;
        `kernel_timings` holds the measurement).
        prefill_rows: rows per prefill forward (at least T_max); its KV rows are bitwise those of 1-row calls.
        negative_control (tests only): after a rejection, sample from the full target instead of
        the residual — a deliberately wrong verifier that exactness tests must detect."""
        if kernels != "auto" and kernels not in KERNEL_FAMILIES:
            raise ValueError(f"kernels must be 'auto' or one of {KERNEL_FAMILIES}, got {kernels!r}")
        self.gpu = gpu
        self.config = config = ModelConfig.from_dict(manifest["champion"]["config"])
        self.vocab_size = config.vocab_size
        self.t_max = k_max + 1
        self.context_limit = min(context_limit or config.context_length, config.context_length)
        self.prefill_rows = max(self.t_max, min(prefill_rows, self.context_limit))
        self.columns_workgroup = columns_workgroup
        self.calls = 0
        self.wait_seconds = 0.0  # time blocked on read-backs (the device finishing the submitted work)
        # q/k/v and gate/up as one matmul each where their formats match (gpu_weights.fuse_projections)
        self.tensor_info = tensors = fuse_projections(manifest["champion"]["tensors"], config.n_layers)
        largest = max(
            largest_binding(tensors),
            self.t_max * config.vocab_size * 4,
            config.n_kv_heads * self.context_limit * config.head_dim * 4,
        )
        # attention.wgsl: 64 partial accumulators of head_dim floats, the query, 2 x 64 softmax scalars.
        attention_bytes = (64 * config.head_dim + config.head_dim + 128) * 4
        split_bytes = self.prefill_rows * 64 * 4  # matmul_split.wgsl: 64 slice sums per row
        check_limits(gpu.limits, largest, gpu.adapter_name, max(attention_bytes, split_bytes))
        self.weights = self._upload_weights(tensors, read_file, shader_source("repack"), progress)
        self.weight_bytes = sum(w.buffer.size for w in self.weights.values())  # on the GPU, after repacking
        self.k_widest = max(t["shape"][0] for t in tensors.values() if t["format"] != "f32" and len(t["shape"]) == 2)
        self.uniform_activations = self.t_max * self.k_widest * 4 <= gpu.limits.get(
            "max-uniform-buffer-binding-size", 0
        )
        self._allocate_scratch()
        header = constants_header(config, self.context_limit, self.t_max, negative_control)
        common = shader_source("common")
        self.pipelines = {}
        for name in SHADER_FILES[1:]:
            self.pipelines[name] = gpu.create_pipeline(header + common + shader_source(name), name, name)
        families = KERNEL_FAMILIES if kernels == "auto" else (kernels,)
        prefill_header = constants_header(config, self.context_limit, self.prefill_rows, negative_control)
        uniform_vec4s = self.t_max * self.k_widest // 4 if self.uniform_activations else None
        for family in families:
            attention = attention_source(shader_source("attention"), ATTENTION_LANES[family])
            self.pipelines[f"{family}.attention"] = gpu.create_pipeline(
                header + common + attention, "attention", f"{family}.attention"
            )
            source = shader_source(f"matmul_{family}")
            code = header + common + matmul_source(source, uniform_vec4s, columns_workgroup)
            prefill_code = prefill_header + common + matmul_source(source, None, columns_workgroup)
            for name, (entry, constants) in MATMUL_VARIANTS.items():
                self.pipelines[f"{family}.{name}"] = gpu.create_pipeline(code, entry, f"{family}.{name}", constants)
                self.pipelines[f"prefill.{family}.{name}"] = gpu.create_pipeline(
                    prefill_code, entry, f"prefill.{family}.{name}", constants
                )
        verify_code = header + common + "".join(shader_source(name) for name in VERIFY_SHADERS)
        self.pipelines["verify"] = gpu.create_pipeline(verify_code, "verify", "verify")
        self.steps_by_family = {family: self._build_steps(family) for family in families}
        self.prefill_steps_by_family = {family: self._build_steps(family, prefill=True) for family in families}
        self.verify_step = self._verify_step()
        self.verify_only = [self.verify_step]
        self.shader_source = shader_source  # for pipelines built on first use (the self-test's philox_check)
        self.presence_for: tuple[int, ...] = ()  # the context whose tokens the presence bitmap holds
        self.kv = CachedPrefix()  # the tokens the K/V cache rows hold
        self.kernel_timings: dict[str, dict[str, float]] = {}
        for family in families:
            self._use_family(family)
            self._warm_up()
        if len(families) > 1:
            self._calibrate(families)

    def _warm_up(self) -> None:
        """One small forward at load: compiles every pipeline before the first request. Measured on
        lavapipe: when the first forward ever has 5 or more rows, every later call stays 10-50x slower
        (a scheduling quirk of the CPU rasterizer); a 4-row first call avoids it."""
        self._forward_and_wait(min(4, self.t_max, self.context_limit))
        self.kv.clear()  # the warm-up rows hold nothing anyone asked for

    def _forward_and_wait(self, rows: int) -> float:
        """Seconds for a forward of `rows` placeholder tokens at position 0, until the device finished it."""
        began = time.perf_counter()
        self.forward([0] * rows, 0)
        self.gpu.read_buffer(self.result, 0, 4)
        return time.perf_counter() - began

    def _use_family(self, family: str) -> None:
        self.kernel_family = family
        self.steps = self.steps_by_family[family]
        self.prefill_steps = self.prefill_steps_by_family[family]
        self.plans: dict[int, list[Dispatch]] = {}
        self.verify_plans: dict[int, list[Dispatch]] = {}
        self.prefill_plans: dict[int, list[Dispatch]] = {}

    def _calibrate(self, families: Sequence[str], repeats: int = 2) -> None:
        """Time a 1-row and a min(5, T_max)-row forward per family (best of `repeats`); keep the family
        with the smallest sum. Milliseconds go to kernel_timings[family] = {"t1_ms", "t5_ms"}."""
        wide = min(5, self.t_max, self.context_limit)
        for family in families:
            self._use_family(family)
            timing = {}
            for rows, key in ((1, "t1_ms"), (wide, "t5_ms")):
                timing[key] = min(self._forward_and_wait(rows) for _ in range(repeats)) * 1000
            self.kernel_timings[family] = timing
        self._use_family(min(families, key=lambda f: sum(self.kernel_timings[f].values())))
        self.kv.clear()

    # -- loading -----------------------------------------------------------

    def _upload_weights(
        self, tensors: dict, read_file: Callable[[str], bytes], repack_source: str, progress=None
    ) -> dict:
        shards: dict[str, bytes] = {}

        def read_part(part: dict):
            nonlocal shards
            if part["shard"] not in shards:
                shards = {part["shard"]: read_file(part["shard"])}  # keep one shard in memory at a time
            return byte_range(shards[part["shard"]], part["offset"], part["offset"] + part["bytes"])

        uploader = WeightUploader(self.gpu, tensors, repack_source)
        weights = {}
        total = sum(part["bytes"] for entry in tensors.values() for part in entry["parts"])
        done = 0
        try:
            for name, entry in tensors.items():
                weights[name] = uploader.upload(name, entry, read_part)
                done += sum(part["bytes"] for part in entry["parts"])
                if progress is not None:
                    progress(done, total)
        finally:
            uploader.close()
        return weights

    def _allocate_scratch(self) -> None:
        """Every buffer but the weights. t = prefill_rows: activations hold a prefill chunk; logits and the
        verify buffers hold T_max rows. Shapes below are in elements (f32 unless marked u32)."""
        c, gpu = self.config, self.gpu
        t = self.prefill_rows
        f32 = 4
        self.params = gpu.create_buffer(PARAMS.size, "params", usage="uniform")  # kernel_abi.PARAMS
        self.tokens = gpu.create_buffer(t * 4, "tokens")  # u32 [t]: the call's input tokens
        self.x = gpu.create_buffer(t * c.d_model * f32, "x")  # [t, D]: the residual stream
        # Matmul inputs [t, k_widest]; the verify plans may bind them as uniform arrays of T_max * k_widest floats.
        matmul_input = t * self.k_widest * f32
        usage = "storage+uniform" if self.uniform_activations else "storage"
        self.h = gpu.create_buffer(matmul_input, "h", usage=usage)  # [t, D]: the normed stream
        self.qkv = gpu.create_buffer(t * qkv_width(c) * f32, "qkv")  # [t, QKV]: row = q [H*HD] | k | v [KVH*HD]
        self.attn = gpu.create_buffer(matmul_input, "attn", usage=usage)  # [t, H * HD]: attention output
        self.gate_up = gpu.create_buffer(t * 2 * c.d_ffn * f32, "gate_up")  # [t, 2 * FFN]: row = gate | up
        self.act = gpu.create_buffer(matmul_input, "act", usage=usage)  # [t, FFN]: silu(gate) * up
        self.logits = gpu.create_buffer(self.t_max * c.vocab_size * f32, "logits")  # [T_max, V]
        kv_bytes = c.n_kv_heads * self.context_limit * c.head_dim * f32  # per layer: [KVH, CTX, HD]
        self.k_cache = [gpu.create_buffer(kv_bytes, f"k_cache.{i}") for i in range(c.n_layers)]
        self.v_cache = [gpu.create_buffer(kv_bytes, f"v_cache.{i}") for i in range(c.n_layers)]
        self.rope = gpu.create_buffer(self.context_limit * c.head_dim // 2 * 2 * f32, "rope")  # [CTX, HD/2, 2]
        gpu.write_buffer(self.rope, 0, rope_table(c, self.context_limit))
        self.verify_cfg = gpu.create_buffer(VERIFY.size, "verify_cfg", usage="uniform")  # kernel_abi.VERIFY
        self.presence_words = (c.vocab_size + 31) // 32
        self.presence = gpu.create_buffer(self.presence_words * 4, "presence")  # u32 [ceil(V/32)]: context bitmap
        self.q_rows = gpu.create_buffer((self.t_max - 1) * c.vocab_size * f32, "q_rows")  # [k_max, V or Q]
        self.id_map = gpu.create_buffer(c.vocab_size * 4, "id_map")  # u32 [Q <= V]: reduced rows' token ids
        self.work = gpu.create_buffer(2 * c.vocab_size * f32, "work")  # [2, V]: processed row, residual
        self.result = gpu.create_buffer(VERIFY_RESULT.size, "result")  # kernel_abi.VERIFY_RESULT
        self.shapes = {}
        activations = t * c.d_model + t * qkv_width(c) + 2 * t * c.d_ffn + 3 * t * self.k_widest
        verify = (
            (self.t_max - 1) * c.vocab_size + c.vocab_size + 2 * c.vocab_size + self.presence_words
        )  # q rows, id map, work, presence
        self.scratch_bytes = (
            t + activations + self.t_max * c.vocab_size + verify
        ) * f32  # tokens, activations, logits, verify
        self.kv_bytes = 2 * c.n_layers * kv_bytes

    def _shape(self, k: int, n: int, y_stride: int, y_offset: int):
        key = (k, n, y_stride, y_offset)
        if key not in self.shapes:
            buffer = self.gpu.create_buffer(SHAPE.size, f"shape.{k}x{n}.{y_stride}+{y_offset}", usage="uniform")
            self.gpu.write_buffer(buffer, 0, SHAPE.pack(k=k, n=n, y_stride=y_stride, y_offset=y_offset))
            self.shapes[key] = buffer
        return self.shapes[key]

    # -- the dispatch plan -------------------------------------------------

    def _matmul(self, family: str, x, weight_name: str, y, add: bool = False, prefill: bool = False, y_columns=None):
        """(pipeline, bindings, workgroups(T)) for y = x @ W^T (or y +=) with a kernel family; prefill: the
        pipelines built for prefill_rows rows (activations in storage); y_columns: (row stride, offset) of
        the output in a buffer shared with other projections (default: rows of n, from 0)."""
        weight = self.weights[weight_name]
        k, n = self.tensor_info[weight_name]["shape"]
        pipeline = self.pipelines[
            f"{'prefill.' if prefill else ''}{family}.matmul_{weight.format}{'_add' if add else ''}"
        ]
        uniform_x = family == "columns" and self.uniform_activations and not prefill
        x_binding = Binding(x, 0, self.t_max * self.k_widest * 4) if uniform_x else Binding(x)
        bindings = [
            Binding(self.params),
            Binding(self._shape(k, n, *(y_columns or (n, 0)))),
            x_binding,
            weight.quants(),
            weight.scales(),
            Binding(y),
        ]
        if family == "columns":
            count = groups(groups(n, COLUMNS_PER_INVOCATION), self.columns_workgroup)
        else:
            count = groups(n, COLUMNS_PER_SPLIT_GROUP)
        return pipeline, bindings, lambda rows: (count, 1, 1)

    def _build_steps(self, family: str, prefill: bool = False) -> list:
        """Static (pipeline, bind group, workgroups-of-T) steps of one forward pass with a matmul family;
        prefill: the prefill pass (its own matmul pipelines, up to prefill_rows rows, no final norm or head)."""
        c = self.config
        steps = []

        def add(entry_or_pipeline, bindings, workgroups, label):
            pipeline = self.pipelines[entry_or_pipeline] if isinstance(entry_or_pipeline, str) else entry_or_pipeline
            steps.append((pipeline, self.gpu.create_bind_group(pipeline, bindings, label), workgroups, label))

        embedding = self.weights["token_embd.weight"]
        add(
            "embed",
            [Binding(self.params), Binding(self.tokens), embedding.quants(), embedding.scales(), Binding(self.x)],
            lambda rows: (groups(c.d_model), rows, 1),
            "embed",
        )
        for i in range(c.n_layers):

            def w(part: str, layer: int = i) -> str:
                return f"blk.{layer}.{part}.weight"

            add(
                "rmsnorm",
                [Binding(self.params), Binding(self.x), self.weights[w("attn_norm")].whole(), Binding(self.h)],
                lambda rows: (rows, 1, 1),
                f"l{i}.attn_norm",
            )
            for step in self._projections(family, i, "attn_qkv", self.qkv, prefill):
                add(*step)
            add(
                "rope_kv",
                [
                    Binding(self.params),
                    Binding(self.rope),
                    Binding(self.qkv),
                    Binding(self.k_cache[i]),
                    Binding(self.v_cache[i]),
                ],
                lambda rows: (groups((c.n_heads + c.n_kv_heads) * c.head_dim // 2), rows, 1),
                f"l{i}.rope_kv",
            )
            add(
                f"{family}.attention",
                [
                    Binding(self.params),
                    Binding(self.qkv),
                    Binding(self.k_cache[i]),
                    Binding(self.v_cache[i]),
                    Binding(self.attn),
                ],
                lambda rows: (c.n_heads, rows, 1),
                f"l{i}.attention",
            )
            pipeline, bindings, workgroups = self._matmul(
                family, self.attn, w("attn_output"), self.x, add=True, prefill=prefill
            )
            add(pipeline, bindings, workgroups, f"l{i}.attn_output")
            add(
                "rmsnorm",
                [Binding(self.params), Binding(self.x), self.weights[w("ffn_norm")].whole(), Binding(self.h)],
                lambda rows: (rows, 1, 1),
                f"l{i}.ffn_norm",
            )
            for step in self._projections(family, i, "ffn_gate_up", self.gate_up, prefill):
                add(*step)
            add(
                "swiglu",
                [Binding(self.params), Binding(self.gate_up), Binding(self.act)],
                lambda rows: (groups(c.d_ffn), rows, 1),
                f"l{i}.swiglu",
            )
            pipeline, bindings, workgroups = self._matmul(
                family, self.act, w("ffn_down"), self.x, add=True, prefill=prefill
            )
            add(pipeline, bindings, workgroups, f"l{i}.ffn_down")
        if prefill:
            return steps
        add(
            "rmsnorm",
            [Binding(self.params), Binding(self.x), self.weights["output_norm.weight"].whole(), Binding(self.h)],
            lambda rows: (rows, 1, 1),
            "output_norm",
        )
        head = "token_embd.weight" if c.tied_embeddings else "output.weight"
        pipeline, bindings, workgroups = self._matmul(family, self.h, head, self.logits)
        add(pipeline, bindings, workgroups, "head")
        return steps

    def _projections(self, family: str, layer: int, fused: str, y, prefill: bool) -> list:
        """(pipeline, bindings, workgroups, label) of the matmuls from the normed stream h into y's rows of
        FUSED_PROJECTIONS[fused]: one where the weights were joined at load, else one per part, each writing
        its own columns of the row. Every column is the same dot product either way (bitwise)."""
        joined = f"blk.{layer}.{fused}.weight"
        if joined in self.weights:
            return [(*self._matmul(family, self.h, joined, y, prefill=prefill), f"l{layer}.{fused}")]
        names = [f"blk.{layer}.{part}.weight" for part in FUSED_PROJECTIONS[fused]]
        widths = [self.tensor_info[name]["shape"][1] for name in names]
        steps = []
        for part, name, offset in zip(FUSED_PROJECTIONS[fused], names, itertools.accumulate([0] + widths)):
            step = self._matmul(family, self.h, name, y, prefill=prefill, y_columns=(sum(widths), offset))
            steps.append((*step, f"l{layer}.{part}"))
        return steps

    def _verify_step(self) -> Dispatch:
        buffers = (
            self.verify_cfg,
            self.logits,
            self.tokens,
            self.presence,
            self.q_rows,
            self.id_map,
            self.work,
            self.result,
        )
        pipeline = self.pipelines["verify"]
        return Dispatch(
            pipeline, self.gpu.create_bind_group(pipeline, [Binding(b) for b in buffers], "verify"), (1, 1, 1), "verify"
        )

    def verify_plan(self, rows: int) -> list[Dispatch]:
        """plan(rows) + the verify kernel, built once per T (bindings replay plans by identity)."""
        if rows not in self.verify_plans:
            self.verify_plans[rows] = self.plan(rows) + [self.verify_step]
        return self.verify_plans[rows]

    def plan(self, rows: int) -> list[Dispatch]:
        return self._replay(self.plans, self.steps, rows, self.t_max, "the champion was built")

    def prefill_plan(self, rows: int) -> list[Dispatch]:
        return self._replay(self.prefill_plans, self.prefill_steps, rows, self.prefill_rows, "prefill was built")

    @staticmethod
    def _replay(cache: dict, steps: list, rows: int, most: int, what: str) -> list[Dispatch]:
        """The dispatches of `steps` for `rows` rows, built once per row count and kept in `cache`."""
        if not 1 <= rows <= most:
            raise ValueError(f"{rows} rows; {what} for 1..{most}")
        if rows not in cache:
            cache[rows] = [Dispatch(p, g, workgroups(rows), label) for p, g, workgroups, label in steps]
        return cache[rows]

    # -- running -----------------------------------------------------------

    def forward(self, tokens: Sequence[int], position: int, prefill: bool = False) -> None:
        """Score len(tokens) rows at positions position.. (writes their KV rows); logits stay on the GPU.
        prefill: up to prefill_rows rows, KV rows only (no logits)."""
        rows = len(tokens)
        if position + rows > self.context_limit:
            raise ValueError(f"positions up to {position + rows} exceed the KV capacity {self.context_limit}")
        plan = self.prefill_plan(rows) if prefill else self.plan(rows)
        self.gpu.write_buffer(self.params, 0, PARAMS.pack(rows=rows, position=position))
        self.gpu.write_buffer(self.tokens, 0, array("I", tokens).tobytes())
        self.kv.truncate(position)  # rows from here are unknown until the submit completes
        self.gpu.submit(plan)
        self.calls += 1
        self.kv.write(position, tokens)

    def read_logits(self, rows: int) -> list[list[float]]:
        data = array("f")
        data.frombytes(self.gpu.read_buffer(self.logits, 0, rows * self.vocab_size * 4))
        v = self.vocab_size
        return [data[r * v : (r + 1) * v].tolist() for r in range(rows)]

    def forget(self) -> None:
        """Drop the reusable prefix: the next request prefills from position 0 (benchmarks)."""
        self.kv.clear()

    def cached_rows(self, tokens: Sequence[int]) -> int:
        return common_prefix(self.kv.tokens, tokens)

    def score(self, context: Sequence[int], tokens: Sequence[int]) -> list[bytes]:
        """Raw logits (f32 bytes, one row per token) of `tokens` in one call after `context`'s KV rows."""
        self.prefill(context)
        self.forward(tokens, len(context))
        row = self.vocab_size * 4
        data = self.gpu.read_buffer(self.logits, 0, len(tokens) * row)
        return [data[i * row : (i + 1) * row] for i in range(len(tokens))]

    def philox_words(self, cases: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[tuple[int, ...]]:
        """Philox4x32-10 of each (counter[4], key[2]) on the device (shaders/philox_check.wgsl)."""
        if "philox_check" not in self.pipelines:
            code = self.shader_source("philox") + self.shader_source("philox_check")
            self.pipelines["philox_check"] = self.gpu.create_pipeline(code, "philox_check", "philox_check")
        pipeline = self.pipelines["philox_check"]
        inputs = array("I")
        for counter, key in cases:
            inputs.extend(list(counter) + list(key) + [0, 0])
        cases_buffer = self.gpu.create_buffer(len(inputs) * 4, "philox_cases")
        words = self.gpu.create_buffer(len(cases) * 16, "philox_words")
        try:
            self.gpu.write_buffer(cases_buffer, 0, inputs.tobytes())
            bind_group = self.gpu.create_bind_group(pipeline, [Binding(cases_buffer), Binding(words)], "philox_check")
            self.gpu.submit([Dispatch(pipeline, bind_group, (1, 1, 1), "philox_check")])
            out = array("I")
            out.frombytes(self.gpu.read_buffer(words, 0, len(cases) * 16))
        finally:
            self.gpu.destroy_buffer(cases_buffer)
            self.gpu.destroy_buffer(words)
        return [tuple(out[4 * i : 4 * i + 4]) for i in range(len(cases))]

    def memory_bytes(self) -> dict[str, int]:
        return {"weights": self.weight_bytes, "kv": self.kv_bytes, "scratch": self.scratch_bytes}

    def prefill(self, tokens: Sequence[int]) -> None:
        """KV rows 0..len(tokens)-1, in chunks of prefill_rows rows. Rows already holding the same token
        prefix are kept: a KV row depends only on the tokens up to it (batch invariance makes that
        bitwise), so a repeated or extended conversation skips its known prefix."""
        tokens = list(tokens)
        start = self.kv.keep_common(tokens)
        for chunk in range(start, len(tokens), self.prefill_rows):
            self.forward(tokens[chunk : chunk + self.prefill_rows], chunk, prefill=True)

    def verify(self, request: VerifyRequest) -> Decision:
        """Score [frontier, drafts] at positions c..c+k and decide on the GPU; reads back 20 bytes."""
        c = request.committed_kv
        if not self.kv.holds(request.context[:c]):  # e.g. after a failed or cancelled call
            self.prefill(request.context[:c])
        rows = self._prepare_verify(request)
        self.kv.truncate(c)  # rows from c are unknown until the submit completes
        try:
            self.gpu.submit(self.verify_plan(rows))
            decision = self._read_decision()
        except (TargetNumericError, ResidualMassError, DraftNumericError):
            raise
        except Exception as error:
            raise DeviceError(f"GPU failure during verify: {type(error).__name__}: {error}") from error
        self.calls += 1
        self.kv.write(c, (request.context[-1],) + tuple(request.drafts))
        return decision

    def verify_logits(self, logits_rows: Sequence[Sequence[float]], request: VerifyRequest) -> Decision:
        """Run only the verify kernel on given logits rows (kernel tests and diagnostics)."""
        rows = self._prepare_verify(request)
        if len(logits_rows) != rows or any(len(r) != self.vocab_size for r in logits_rows):
            raise ValueError(f"need {rows} rows of {self.vocab_size} logits")
        data = array("f")
        for row in logits_rows:
            data.extend(row)
        self.gpu.write_buffer(self.logits, 0, data.tobytes())
        self.gpu.submit(self.verify_only)  # no forward: the KV cache is untouched
        return self._read_decision()

    def _prepare_verify(self, request: VerifyRequest) -> int:
        k = len(request.drafts)
        rows = k + 1
        if rows > self.t_max:
            raise ValueError(f"k = {k} drafts; the champion was built for k_max = {self.t_max - 1}")
        if request.committed_kv + rows > self.context_limit:
            raise ValueError(
                f"positions up to {request.committed_kv + rows} exceed the KV capacity {self.context_limit}"
            )
        settings = request.settings
        self._write_presence(request.context, settings.repetition_penalty != 1)
        kind = self._write_draft_rows(request) if k and not settings.greedy else DraftKind.POINT_MASSES
        seed = 0
        if not settings.greedy:
            if not isinstance(request.draws, SeededDraws):
                raise TypeError("the GPU champion samples with Philox on the device: request.draws must be SeededDraws")
            seed = request.draws.stream.seed
        reduced = len(request.draft_rows[0].ids) if kind == DraftKind.REDUCED_ROWS else 0
        self.gpu.write_buffer(
            self.verify_cfg,
            0,
            VERIFY.pack(
                drafts=k,
                greedy=1 if settings.greedy else 0,
                draft_kind=kind,
                reduced=reduced,
                temperature=float(settings.temperature),
                top_p=float(settings.top_p),
                penalty=float(settings.repetition_penalty),
                top_k=settings.top_k,
                seed_lo=seed & 0xFFFFFFFF,
                seed_hi=(seed >> 32) & 0xFFFFFFFF,
                round=request.round_index,
                token=len(request.context),
            ),
        )
        self.gpu.write_buffer(self.params, 0, PARAMS.pack(rows=rows, position=request.committed_kv))
        self.gpu.write_buffer(self.tokens, 0, array("I", (request.context[-1],) + tuple(request.drafts)).tobytes())
        return rows

    def _read_decision(self) -> Decision:
        began = time.perf_counter()
        data = self.gpu.read_buffer(self.result, 0, RESULT_BYTES)
        self.wait_seconds += time.perf_counter() - began
        result = VERIFY_RESULT.unpack(data)
        if result["status"] != Status.OK:
            status = Status(result["status"])
            raise RESULT_ERRORS[status](f"verify kernel status {status.name} at row {result['accepted']}")
        return Decision(result["accepted"], result["terminal"], RESULT_KINDS[ResultKind(result["kind"])])

    def _write_presence(self, context: Sequence[int], needed: bool) -> None:
        """Bit i set: token i occurs in the committed context (for the repetition penalty)."""
        if not needed or tuple(context) == self.presence_for:
            return
        words = [0] * self.presence_words
        for token in context:
            words[token >> 5] |= 1 << (token & 31)
        self.gpu.write_buffer(self.presence, 0, array("I", words).tobytes())
        self.presence_for = tuple(context)

    def _write_draft_rows(self, request: VerifyRequest) -> int:
        rows = request.draft_rows
        kind = DRAFT_KINDS[type(rows[0])]
        if any(DRAFT_KINDS[type(r)] != kind for r in rows):
            raise ValueError("all draft rows of a round must be of one kind")
        if kind == DraftKind.REDUCED_ROWS:
            ids = rows[0].ids
            if any(r.ids is not ids and tuple(r.ids) != tuple(ids) for r in rows):
                raise ValueError("reduced draft rows of a round must share one id map")
            self.gpu.write_buffer(self.id_map, 0, array("I", ids).tobytes())
        if kind in (DraftKind.FULL_ROWS, DraftKind.REDUCED_ROWS):
            width = self.vocab_size if kind == DraftKind.FULL_ROWS else len(rows[0].ids)
            for i, row in enumerate(rows):
                self.gpu.write_buffer(self.q_rows, i * width * 4, f32_data(row.probs))
        return kind


def f32_data(values):
    """A q row as write_buffer data: f32 bytes of Python lists, array('f') and numpy rows; anything
    else (a JS Float32Array in the browser) passes through untouched, so it is never copied here."""
    if isinstance(values, (list, tuple)):
        return array("f", values).tobytes()
    if isinstance(values, array):
        return values.tobytes() if values.typecode == "f" else array("f", values).tobytes()
    if getattr(values, "dtype", None) is not None:
        return values.astype("float32").tobytes() if str(values.dtype) != "float32" else values.tobytes()
    return values
