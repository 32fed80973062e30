"""Export a Llama-architecture model (GGUF-style tensors) to ONNX for onnxruntime (web).

Graph (opset 17, IR 10: what onnxruntime-web 1.30 loads), batch 1:
  inputs   input_ids int64 [1, T]; past_key_i / past_value_i float32 [1, kv_heads, P, head_dim];
           temperature float32 [1] (0 = greedy); uniform float32 [1] in (0, 1]
  outputs  logits float32 [1, V'] (raw, last position); probs float32 [1, V'] (processed:
           softmax(logits / T), or one-hot argmax when T = 0, quantised to multiples of 2^-24 summing to
           exactly 1: see add_sampler); token int64 [1] (vocabulary id: the inverse CDF of probs at
           `uniform`, exactly); entropy_bits float32 [1] (entropy of softmax(logits / T) in bits, T = 1
           when the call is greedy: how sure the row is, for the neural proposer's stop);
           present_key_i / present_value_i [1, kv_heads, P + T, head_dim]
V' is the output vocabulary: the whole vocabulary, or a reduced one whose ids are in
`id_map` (then probs[j] is the mass of token id_map[j] and every other token has q = 0).

Weights keep their quantized values exactly:
  Q4_1 (w = d*q + m): com.microsoft MatMulNBits bits=4 block 32, scale d, float zero
        point -m/d (blocks with d = 0: codes 0, scale 1, zero point -m);
  Q8_0 (w = d*q): MatMulNBits bits=8, codes q + 128, zero point 128; the embedding table
        serves both the lookup (Gather + dequantize) and the tied head; in draft graphs each other
        Q8_0 projection is then rewritten as a MatMul over constant ops on the same codes
        (unpack_q8_matmuls: float32 weights folded at load, the fast kernel);
  F32 norms as initializers. RoPE rotates adjacent pairs (GGUF convention).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pyodide_app.cpu_champion import KEY_BLOCK  # invariant graphs pad attention keys to a multiple of this
from pyodide_app.manifest import ModelConfig

from .reference import dequantize
from .source import ModelSource, SourceError, Tensor

ATTENTION = "gemv"  # invariant graphs: "gemv" (batched MatMul, M = 1) or "products" (Mul + ReduceSum)
OPSET = 17
IR_VERSION = 10
BLOCK = 32


def q4_1_for_matmulnbits(tensor: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GGUF Q4_1 [in, out] -> (packed codes uint8 [out, nb, 16], scales f32 [out*nb], zero points f32 [out*nb])."""
    k, n = tensor.shape
    nb = k // BLOCK
    blocks = np.asarray(tensor.data, dtype=np.uint8).reshape(n, nb, 20)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    qs = blocks[..., 4:20]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # GGUF: element j low nibble, j+16 high nibble
    flat = d == 0
    codes[flat] = 0
    scales = np.where(flat, np.float32(1), d)
    zero_points = np.where(flat, -m, -m / np.where(flat, np.float32(1), d)).astype(np.float32)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)  # MatMulNBits: low nibble first
    return packed, scales.reshape(-1).astype(np.float32), zero_points.reshape(-1)


def q8_0_table(tensor: Tensor, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """GGUF Q8_0 [d, vocab] -> (codes uint8 [rows, nb, 32] = q + 128, scales f32 [rows, nb])."""
    k, n = tensor.shape
    nb = k // BLOCK
    blocks = np.asarray(tensor.data, dtype=np.uint8).reshape(n, nb, 34)
    if rows is not None:
        blocks = blocks[rows]
    scales = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    codes = (blocks[..., 2:34].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return codes, scales


@dataclass
class Graph:
    nodes: list = field(default_factory=list)
    initializers: list = field(default_factory=list)
    counter: int = 0

    def name(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}_{self.counter}"

    def const(self, value, hint: str = "c") -> str:
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(
        self,
        op_type: str,
        inputs: list[str],
        hint: str = "",
        outputs: list[str] | None = None,
        domain: str = "",
        **attrs,
    ) -> str:
        outputs = outputs or [self.name(hint or op_type.lower())]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, domain=domain or None, **attrs))
        return outputs[0]


class LlamaExporter:
    def __init__(
        self,
        source: ModelSource,
        n_layers: int,
        id_map: np.ndarray | None = None,
        all_rows: bool = False,
        dense: bool = False,
        attention: str = ATTENTION,
    ):
        self.source, self.config, self.n_layers = source, source.config, n_layers
        self.attention = attention  # the invariant graph's attention form (ATTENTION)
        self.id_map = id_map
        self.all_rows = all_rows  # also output all_logits [1, T, V'] (the no-WebGPU champion scores every row)
        self.dense = dense  # float32 weights (d*q + m, the GGUF values): plain Gemm, no MatMulNBits
        self.dense_weights: dict[str, str] = {}  # initializer -> GGUF tensor it dequantises (dense graphs)
        self.tensor_names = {id(tensor): name for name, tensor in source.tensors.items()}
        # Batch-invariant attention (each row computed the same way whatever the call's T): only worth it
        # where the rest of the graph is batch-invariant too, i.e. float32 weights in a champion graph.
        self.invariant = all_rows and dense
        self.g = Graph()

    def matmul(self, x: str, tensor: Tensor, hint: str) -> str:
        """x @ W^T for a projection stored [in, out] in GGUF order, keeping its quantized values."""
        g, (k, n) = self.g, tensor.shape
        if self.dense and tensor.format != "f32":  # Gemm over the GGUF row order [out, in]: no transposed copy
            weight = g.const(dequantize(tensor), hint + "_w")
            self.dense_weights[weight] = self.tensor_names[id(tensor)]
            flat = g.op("Reshape", [x, g.const(np.array([-1, k], np.int64))])
            product = g.op("Gemm", [flat, weight], hint, transB=1)
            return g.op("Reshape", [product, g.const(np.array([1, -1, n], np.int64))])
        if tensor.format == "f32":
            weight = np.asarray(tensor.data, np.float32).reshape(n, k).T
            return g.op("MatMul", [x, g.const(np.ascontiguousarray(weight), hint + "_w")], hint)
        if tensor.format == "q4_1":
            packed, scales, zero_points = q4_1_for_matmulnbits(tensor)
            bits = 4
        else:
            codes, scales_2d = q8_0_table(tensor)
            packed, scales, bits = codes, scales_2d.reshape(-1), 8
            zero_points = np.full(scales.shape, 128, np.uint8)
        inputs = [x, g.const(packed, hint + "_q"), g.const(scales, hint + "_s"), g.const(zero_points, hint + "_z")]
        return g.op("MatMulNBits", inputs, hint, domain="com.microsoft", K=k, N=n, bits=bits, block_size=BLOCK)

    def rms_norm(self, x: str, weight: Tensor) -> str:
        g = self.g
        mean = g.op("ReduceMean", [g.op("Mul", [x, x])], axes=[-1], keepdims=1)
        inv = g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [mean, g.const(np.float32(self.config.rms_eps))])])])
        return g.op("Mul", [g.op("Mul", [x, inv]), g.const(np.asarray(weight.data, np.float32), "norm")])

    def rope(self, x: str, heads: int, cos: str, sin: str) -> str:
        """x [1, T, heads*hd] -> rotated [1, T, heads, hd] (adjacent pairs)."""
        g, hd = self.g, self.config.head_dim
        pairs = g.op("Reshape", [x, g.const(np.array([1, -1, heads, hd // 2, 2], np.int64))])
        even, odd = self.g.name("even"), self.g.name("odd")
        g.op("Split", [pairs, g.const(np.array([1, 1], np.int64))], outputs=[even, odd], axis=-1)
        out_even = g.op("Sub", [g.op("Mul", [even, cos]), g.op("Mul", [odd, sin])])
        out_odd = g.op("Add", [g.op("Mul", [even, sin]), g.op("Mul", [odd, cos])])
        joined = g.op("Concat", [out_even, out_odd], axis=-1)
        return g.op("Reshape", [joined, g.const(np.array([1, -1, heads, hd], np.int64))])

    # Attention without MatMul for invariant graphs: onnxruntime's MatMul on activations gives a row other
    # last bits when the call has more rows (measured 1.1e-5 on q.k), while an elementwise product summed
    # over a fixed axis computes every output the same way whatever T is.
    def invariant_scores(self, qg: str, k: str) -> str:
        """qg [1, kv, g, T, hd], k [1, kv, S, hd] -> q.k [1, kv, g, T, S]."""
        g = self.g
        q5 = g.op("Unsqueeze", [qg, g.const(np.array([4], np.int64))])  # [1, kv, g, T, 1, hd]
        k5 = g.op("Unsqueeze", [k, g.const(np.array([2, 3], np.int64))])  # [1, kv, 1, 1, S, hd]
        return g.op("ReduceSum", [g.op("Mul", [q5, k5]), g.const(np.array([-1], np.int64))], keepdims=0)

    # The same without materialising [T, S, hd] products: batched MatMul with every (kv head, group, row) its
    # own batch entry of one query row (M = 1), so a row's dot products never depend on the call's T.
    def gemv_scores(self, qg: str, k: str) -> str:
        """qg [1, kv, g, T, hd], k [1, kv, S, hd] -> q.k [1, kv, g, T, S]."""
        g = self.g
        q6 = g.op("Unsqueeze", [qg, g.const(np.array([4], np.int64))])  # [1, kv, g, T, 1, hd]
        kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])  # [1, kv, hd, S]
        k6 = g.op("Unsqueeze", [kt, g.const(np.array([2, 3], np.int64))])  # [1, kv, 1, 1, hd, S]
        return g.op("Squeeze", [g.op("MatMul", [q6, k6]), g.const(np.array([4], np.int64))])

    def gemv_mix(self, weights: str, v: str) -> str:
        """weights [1, kv, g, T, S], v [1, kv, S, hd] -> sum_s w v [1, kv, g, T, hd]."""
        g = self.g
        w6 = g.op("Unsqueeze", [weights, g.const(np.array([4], np.int64))])  # [1, kv, g, T, 1, S]
        v6 = g.op("Unsqueeze", [v, g.const(np.array([2, 3], np.int64))])  # [1, kv, 1, 1, S, hd]
        return g.op("Squeeze", [g.op("MatMul", [w6, v6]), g.const(np.array([4], np.int64))])

    def invariant_mix(self, weights: str, v: str) -> str:
        """weights [1, kv, g, T, S], v [1, kv, S, hd] -> sum_s w v [1, kv, g, T, hd]."""
        g = self.g
        w6 = g.op("Unsqueeze", [weights, g.const(np.array([5], np.int64))])  # [1, kv, g, T, S, 1]
        v6 = g.op("Unsqueeze", [v, g.const(np.array([2, 3], np.int64))])  # [1, kv, 1, 1, S, hd]
        return g.op("ReduceSum", [g.op("Mul", [w6, v6]), g.const(np.array([-2], np.int64))], keepdims=0)

    def build(self) -> onnx.ModelProto:
        g, c = self.g, self.config
        kv, hd, group = c.n_kv_heads, c.head_dim, c.n_heads // c.n_kv_heads
        inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "T"])]
        outputs = []
        for i in range(self.n_layers):
            for kind in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(f"past_{kind}_{i}", TensorProto.FLOAT, [1, kv, "P", hd]))
                outputs.append(
                    helper.make_tensor_value_info(f"present_{kind}_{i}", TensorProto.FLOAT, [1, kv, "S", hd])
                )
        inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("temperature", "uniform")]

        # Positions P..P+T-1, RoPE tables [1, T, 1, hd/2, 1], causal mask [T, S].
        past_len = g.op("Gather", [g.op("Shape", ["past_key_0"]), g.const(np.int64(2))], axis=0)
        seq_len = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(np.int64(1))], axis=0)
        total_len = g.op("Add", [past_len, seq_len])
        one = g.const(np.int64(1))
        positions = g.op("Range", [past_len, total_len, one])
        inv_freq = (c.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)).astype(np.float32)
        angles = g.op(
            "Mul",
            [
                g.op("Unsqueeze", [g.op("Cast", [positions], to=TensorProto.FLOAT), g.const(np.array([1], np.int64))]),
                g.const(inv_freq[None, :]),
            ],
        )
        table_shape = g.const(np.array([1, -1, 1, hd // 2, 1], np.int64))
        cos = g.op("Reshape", [g.op("Cos", [angles]), table_shape])
        sin = g.op("Reshape", [g.op("Sin", [angles]), table_shape])
        # Attention length: the keys 0..P+T-1, padded with zero rows up to a multiple of KEY_BLOCK in an
        # invariant graph, so that a row's reductions over keys run over the same blocks whatever the call's
        # T: the extra terms are exact zeros.
        attention_len = total_len
        if self.invariant:
            block = g.const(np.int64(KEY_BLOCK))
            attention_len = g.op(
                "Mul", [g.op("Div", [g.op("Add", [total_len, g.const(np.int64(KEY_BLOCK - 1))]), block]), block]
            )
            key_pad = g.op("Sub", [attention_len, total_len])
            self.key_pads = g.op(
                "Concat",
                [
                    g.const(np.zeros(6, np.int64)),
                    g.op("Unsqueeze", [key_pad, g.const(np.array([0], np.int64))]),
                    g.const(np.zeros(1, np.int64)),
                ],
                axis=0,
            )  # [0,0,0,0, 0,0,pad,0] for [1,kv,S,hd]
        key_positions = g.op(
            "Unsqueeze", [g.op("Range", [g.const(np.int64(0)), attention_len, one]), g.const(np.array([0], np.int64))]
        )
        allowed = g.op("LessOrEqual", [key_positions, g.op("Unsqueeze", [positions, g.const(np.array([1], np.int64))])])
        neg_inf = g.const(np.float32(-np.inf))

        # Embedding from the Q8_0 table (shared with the tied head).
        embed = self.source.require("token_embd.weight")
        if self.dense:  # one float32 table [vocab, d] for the lookup and (transposed by Gemm) the tied head
            self.embed_table = g.const(dequantize(embed), "embd_f32")
            self.dense_weights[self.embed_table] = "token_embd.weight"
            x = g.op("Gather", [self.embed_table, "input_ids"], axis=0)  # [1, T, d]
        else:
            codes, scales = q8_0_table(embed)
            self.embed_codes, self.embed_scales = g.const(codes, "embd_q"), g.const(scales.reshape(-1), "embd_s")
            scales_2d = g.op("Reshape", [self.embed_scales, g.const(np.array(scales.shape, np.int64))])
            rows = g.op(
                "Cast", [g.op("Gather", [self.embed_codes, "input_ids"], axis=0)], to=TensorProto.FLOAT
            )  # [1,T,nb,32]
            row_scales = g.op(
                "Unsqueeze", [g.op("Gather", [scales_2d, "input_ids"], axis=0), g.const(np.array([-1], np.int64))]
            )
            x = g.op("Mul", [g.op("Sub", [rows, g.const(np.float32(128))]), row_scales])
            x = g.op("Reshape", [x, g.const(np.array([1, -1, c.d_model], np.int64))])

        for i in range(self.n_layers):

            def t(part: str, layer: int = i):
                return self.source.require(f"blk.{layer}.{part}.weight")

            h = self.rms_norm(x, t("attn_norm"))
            q = self.rope(self.matmul(h, t("attn_q"), f"l{i}_q"), c.n_heads, cos, sin)
            k = self.rope(self.matmul(h, t("attn_k"), f"l{i}_k"), kv, cos, sin)
            v = g.op("Reshape", [self.matmul(h, t("attn_v"), f"l{i}_v"), g.const(np.array([1, -1, kv, hd], np.int64))])
            k = g.op(
                "Concat",
                [f"past_key_{i}", g.op("Transpose", [k], perm=[0, 2, 1, 3])],
                outputs=[f"present_key_{i}"],
                axis=2,
            )
            v = g.op(
                "Concat",
                [f"past_value_{i}", g.op("Transpose", [v], perm=[0, 2, 1, 3])],
                outputs=[f"present_value_{i}"],
                axis=2,
            )
            if self.invariant:  # zero key/value rows up to the padded attention length (not in the KV outputs)
                k = g.op("Pad", [k, self.key_pads])
                v = g.op("Pad", [v, self.key_pads])
            qg = g.op(
                "Reshape",
                [g.op("Transpose", [q], perm=[0, 2, 1, 3]), g.const(np.array([1, kv, group, -1, hd], np.int64))],
            )
            if self.invariant and self.attention == "gemv":
                scores, attn_of = self.gemv_scores(qg, k), self.gemv_mix
            elif self.invariant:
                scores, attn_of = self.invariant_scores(qg, k), self.invariant_mix
            else:
                kt = g.op("Unsqueeze", [g.op("Transpose", [k], perm=[0, 1, 3, 2]), g.const(np.array([2], np.int64))])
                scores = g.op("MatMul", [qg, kt])

                def attn_of(w, values):
                    return g.op("MatMul", [w, g.op("Unsqueeze", [values, g.const(np.array([2], np.int64))])])

            scores = g.op("Mul", [scores, g.const(np.float32(1.0 / np.sqrt(hd)))])
            weights = g.op("Softmax", [g.op("Where", [allowed, scores, neg_inf])], axis=-1)
            attn = attn_of(weights, v)  # [1,kv,g,T,hd]
            attn = g.op("Reshape", [attn, g.const(np.array([1, c.n_heads, -1, hd], np.int64))])
            attn = g.op(
                "Reshape",
                [g.op("Transpose", [attn], perm=[0, 2, 1, 3]), g.const(np.array([1, -1, c.d_model], np.int64))],
            )
            x = g.op("Add", [x, self.matmul(attn, t("attn_output"), f"l{i}_o")])
            h = self.rms_norm(x, t("ffn_norm"))
            gate = self.matmul(h, t("ffn_gate"), f"l{i}_gate")
            up = self.matmul(h, t("ffn_up"), f"l{i}_up")
            x = g.op(
                "Add",
                [
                    x,
                    self.matmul(
                        g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up]), t("ffn_down"), f"l{i}_down"
                    ),
                ],
            )

        last_index = g.op("Sub", [seq_len, one])
        if self.all_rows:
            self.head(self.rms_norm(x, self.source.require("output_norm.weight")), last_index)
            outputs.append(helper.make_tensor_value_info("all_logits", TensorProto.FLOAT, [1, "T", "V"]))
        else:
            last = g.op("Gather", [x, last_index], axis=1)  # [1, d_model]
            self.head(self.rms_norm(last, self.source.require("output_norm.weight")))
        outputs = (
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, "V"]) for n in ("logits", "probs")]
            + [helper.make_tensor_value_info("token", TensorProto.INT64, [1])]
            + [helper.make_tensor_value_info("entropy_bits", TensorProto.FLOAT, [1])]
            + outputs
        )
        graph = helper.make_graph(g.nodes, "draft", inputs, outputs, g.initializers)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
            ir_version=IR_VERSION,
        )
        model.producer_name = "spec-chat build_tools"
        return model

    def head(self, hidden: str, last_index: str | None = None) -> None:
        """Tied (or separate) head over the output vocabulary, then processing and sampling.
        With last_index, `hidden` holds every row: all_logits is the head over all rows and logits its last."""
        g, c = self.g, self.config
        head_out = "all_logits" if last_index is not None else "logits"
        if self.dense and c.tied_embeddings and self.id_map is None:
            flat = g.op("Reshape", [hidden, g.const(np.array([-1, c.d_model], np.int64))])  # [T, d]
            scores = g.op("Gemm", [flat, self.embed_table], transB=1)  # [T, vocab]
            g.op("Reshape", [scores, g.const(np.array([1, -1, c.vocab_size], np.int64))], outputs=[head_out])
            if last_index is not None:
                g.op("Gather", ["all_logits", last_index], outputs=["logits"], axis=1)
            add_sampler(g, self.id_map)
            return
        if c.tied_embeddings and self.id_map is None:  # the embedding table itself, not a copy
            out_vocab, nb = c.vocab_size, c.d_model // BLOCK
            codes_name, scales_name = self.embed_codes, self.embed_scales
        else:
            name = "token_embd.weight" if c.tied_embeddings else "output.weight"
            codes, scales = q8_0_table(self.source.require(name), self.id_map)
            out_vocab, nb = scales.shape
            codes_name, scales_name = g.const(codes, "head_q"), g.const(scales.reshape(-1), "head_s")
        zero_points = np.full(out_vocab * nb, 128, np.uint8)
        inputs = [hidden, codes_name, scales_name, g.const(zero_points, "head_z")]
        g.op(
            "MatMulNBits",
            inputs,
            outputs=[head_out],
            domain="com.microsoft",
            K=c.d_model,
            N=out_vocab,
            bits=8,
            block_size=BLOCK,
        )
        if last_index is not None:
            g.op("Gather", ["all_logits", last_index], outputs=["logits"], axis=1)
        add_sampler(g, self.id_map)


# q is quantised onto a grid of 2^-24 (the Philox uniforms' own grid): counts n_i >= 0 with sum exactly
# 2^24, q_i = n_i / 2^24 (exact in f32), and the token is the first i with cumsum(n)_i >= ceil(u * 2^24).
# For u = j / 2^24 that is exactly the inverse CDF of the reported q, in any arithmetic: the law the graph
# samples from IS the q it reports (a float cumsum could fall short of its total and pick index 0).
GRID = 1 << 24


def add_sampler(g: Graph, id_map: np.ndarray | None) -> None:
    """logits [1, V'], temperature [1], uniform [1] -> probs [1, V'] (the quantised q), token [1] (vocabulary id),
    entropy_bits [1] (of softmax(logits / T) before quantising; T = 1 at temperature 0).

    Counts: n_i = floor(p_i * 2^24) with p = softmax(logits / T) (T = 0: one-hot argmax, lowest index wins);
    rescaled in integers by 2^24 / sum(n) when float rounding pushed the sum over 2^24; the shortfall
    (< V' + 1 counts) goes to the argmax. Integer arithmetic throughout, so every step is exact.
    """
    i64 = TensorProto.INT64
    sampling = g.op("Greater", ["temperature", g.const(np.float32(0))])
    safe_t = g.op("Where", [sampling, "temperature", g.const(np.float32(1))])
    scaled = g.op("Div", ["logits", safe_t])
    soft = g.op("Softmax", [scaled], axis=-1)
    last_axis = g.const(np.array([-1], np.int64))
    plogp = g.op("ReduceSum", [g.op("Mul", [soft, g.op("LogSoftmax", [scaled], axis=-1)]), last_axis], keepdims=0)
    g.op("Mul", [plogp, g.const(np.float32(-1 / np.log(2)))], outputs=["entropy_bits"])  # nats -> bits, [1]
    best = g.op("ArgMax", ["logits"], axis=-1, keepdims=0, select_last_index=0)  # lowest index wins ties
    out_vocab = g.op(
        "Slice", [g.op("Shape", ["logits"]), g.const(np.array([1], np.int64)), g.const(np.array([2], np.int64))]
    )
    onehot = g.op("OneHot", [best, out_vocab, g.const(np.array([0, 1], np.float32))], axis=-1)
    grid = g.const(np.int64(GRID))
    p = g.op("Where", [sampling, soft, onehot])
    counts = g.op("Cast", [g.op("Floor", [g.op("Mul", [p, g.const(np.float32(GRID))])])], to=i64)
    total = g.op("ReduceSum", [counts], keepdims=1)
    counts = g.op("Div", [g.op("Mul", [counts, grid]), g.op("Max", [total, grid])])  # sum <= 2^24 (floor division)
    shortfall = g.op("Sub", [grid, g.op("ReduceSum", [counts], keepdims=1)])
    counts = g.op("Add", [counts, g.op("Mul", [g.op("Cast", [onehot], to=i64), shortfall])])  # sum == 2^24
    g.op("Div", [g.op("Cast", [counts], to=TensorProto.FLOAT), g.const(np.float32(GRID))], outputs=["probs"])
    target = g.op("Cast", [g.op("Ceil", [g.op("Mul", ["uniform", g.const(np.float32(GRID))])])], to=i64)
    target = g.op("Min", [g.op("Max", [target, g.const(np.int64(1))]), grid])  # u in (0, 1]: 1..2^24
    reached = g.op(
        "Cast",
        [g.op("GreaterOrEqual", [g.op("CumSum", [counts, g.const(np.int64(-1))]), target])],
        to=TensorProto.INT32,
    )
    index = g.op("ArgMax", [reached], axis=-1, keepdims=0, select_last_index=0)  # first index reaching the target
    if id_map is None:
        g.op("Identity", [index], outputs=["token"])
    else:
        g.op("Gather", [g.const(id_map.astype(np.int64), "id_map"), index], outputs=["token"], axis=0)


SAMPLER_OUTPUTS = ("probs", "token", "entropy_bits")
# What every graph of a package returns (manifest entry "outputs"; champions add all_logits).
GRAPH_OUTPUTS = ["logits", "probs", "token", "entropy_bits", "present_key_<i>", "present_value_<i>"]


def replace_sampler(model: onnx.ModelProto, id_map: np.ndarray | None) -> onnx.ModelProto:
    """The same graph with its sampler (everything that only feeds probs/token/entropy_bits) rebuilt by
    add_sampler: weights, logits and KV outputs untouched. Upgrades drafts exported before the sampler
    changed (and adds the entropy_bits output to graphs made before it existed)."""
    graph = model.graph
    names = [o.name for o in graph.output]
    if "entropy_bits" not in names:
        entropy = helper.make_tensor_value_info("entropy_bits", TensorProto.FLOAT, [1])
        graph.output.insert(names.index("token") + 1, entropy)
    needed = {o.name for o in graph.output if o.name not in SAMPLER_OUTPUTS}
    kept = []
    for node in reversed(graph.node):  # nodes are in topological order: walk back from the kept outputs
        if any(out in needed for out in node.output):
            kept.append(node)
            needed.update(node.input)
    kept.reverse()
    g = Graph(counter=10_000_000)  # fresh node names cannot collide with the exporter's
    add_sampler(g, id_map)
    initializers = [i for i in graph.initializer if i.name in needed] + g.initializers
    del graph.node[:]
    graph.node.extend(kept + g.nodes)
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    onnx.checker.check_model(model)
    return model


def unpack_q8_matmuls(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with each Q8_0 projection (MatMulNBits bits=8 over constant codes) as a MatMul over its
    float32 weights, written as constant ops on the same codes: w = (code - 128) * scale, exact in float32,
    transposed to [K, N]. The file keeps its size; onnxruntime folds the constants into one float32 table at
    session creation (natively and on the web), because its bits=8 MatMulNBits has no fast kernel: the
    shipped draft's step went 7.9 -> 1.4 ms natively, one thread. Logits move by summation order only.
    Codes that another node reads too (a tied embedding table) stay packed: unpacked, the table would be held
    twice, once as 4-byte floats."""
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    readers = Counter(name for node in graph.node for name in node.input)
    reshaped = {}  # scales initializer name -> the same values as [N, K / BLOCK, 1], under the same name
    g = Graph(counter=20_000_000)  # fresh names cannot collide with the exporter's or the sampler's
    nodes = []
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        constant = len(node.input) >= 4 and all(name in initializers for name in node.input[1:4])
        constant = constant and readers[node.input[1]] == readers[node.input[2]] == 1
        if node.op_type != "MatMulNBits" or attrs.get("bits") != 8 or not constant:
            nodes.append(node)
            continue
        k, n = attrs["K"], attrs["N"]
        # node.input[1]: the codes, uint8 [N, K / BLOCK, BLOCK]
        scales = numpy_helper.to_array(initializers[node.input[2]]).reshape(n, -1, 1)  # float32 [N, K / BLOCK, 1]
        reshaped[node.input[2]] = numpy_helper.from_array(scales, node.input[2])
        if not (numpy_helper.to_array(initializers[node.input[3]]) == 128).all():
            raise ValueError(f"{node.name}: 8-bit weights with a zero point other than 128 (not a Q8_0 table)")
        first = len(g.nodes)
        values = g.op("Cast", [node.input[1]], "q8_values", to=TensorProto.FLOAT)
        centred = g.op("Sub", [values, g.const(np.float32(128.0), "q8_zero")], "q8_centred")
        weights = g.op("Mul", [centred, node.input[2]], "q8_weights")  # [N, K / BLOCK, BLOCK]
        rows = g.op("Reshape", [weights, g.const(np.array([n, k], np.int64))], "q8_rows")  # [N, K]
        columns = g.op("Transpose", [rows], "q8_columns", perm=[1, 0])  # [K, N]
        g.op("MatMul", [node.input[0], columns], outputs=list(node.output))
        nodes.extend(g.nodes[first:])
    if not g.nodes:
        return model  # nothing to unpack: the graph as it was, byte for byte
    used = {name for node in nodes for name in node.input}
    kept = [reshaped.get(i.name, i) for i in [*graph.initializer, *g.initializers] if i.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    return model


def without_weights(model: onnx.ModelProto, dense_weights: dict[str, str]) -> onnx.ModelProto:
    """The graph with each dense weight turned into an external-data reference named after its GGUF tensor
    (location = tensor name, float32, GGUF row order): a runtime builds the values from the package's shards
    (natively: native/dense_champion.py; in the browser: the worker), so the weights are downloaded once."""
    for initializer in model.graph.initializer:
        tensor = dense_weights.get(initializer.name)
        if tensor is None:
            continue
        size = len(initializer.raw_data)
        initializer.ClearField("raw_data")
        initializer.data_location = TensorProto.EXTERNAL
        del initializer.external_data[:]
        for key, value in (("location", tensor), ("offset", "0"), ("length", str(size))):
            entry = initializer.external_data.add()
            entry.key, entry.value = key, value
    return model


def export_llama(
    source: ModelSource,
    n_layers: int,
    path,
    id_map: np.ndarray | None = None,
    all_rows: bool = False,
    dense: bool = False,
    weightless: bool = False,
    attention: str = ATTENTION,
) -> dict:
    """Write the ONNX file; returns the manifest entry (config, io names, vocabulary; with weightless, the
    external weights: initializer -> GGUF tensor)."""
    if not 1 <= n_layers <= source.config.n_layers:
        raise SourceError(f"{source.origin}: draft needs 1..{source.config.n_layers} layers, got {n_layers}")
    exporter = LlamaExporter(source, n_layers, id_map, all_rows, dense, attention)
    model = exporter.build()
    if not all_rows:  # a draft graph: it runs a step per drafted token
        model = unpack_q8_matmuls(model)
    if weightless:
        model = without_weights(model, exporter.dense_weights)
    onnx.save(model, str(path))
    config = ModelConfig(**{**source.config.to_dict(), "n_layers": n_layers})
    return {
        "config": config.to_dict(),
        "output_vocab": int(source.config.vocab_size if id_map is None else len(id_map)),
        "id_map": None if id_map is None else [int(i) for i in id_map],
        "inputs": ["input_ids", "past_key_<i>", "past_value_<i>", "temperature", "uniform"],
        "outputs": GRAPH_OUTPUTS + (["all_logits"] if all_rows else []),
        **({"attention": exporter.attention} if exporter.invariant else {}),
        **({"external_weights": dict(sorted(exporter.dense_weights.items()))} if weightless else {}),
    }
