"""The binary contract between Python and the WGSL kernels, defined once.

Every uniform struct a kernel reads, the record the verify kernel writes back, and the codes both
sides exchange (draft row kinds, result kinds, status) are declared here. `wgsl_declarations()`
renders them as WGSL structs and `const`s; the champion prepends that text to every kernel (after the
model constants), so a field added, removed or reordered here changes both sides at once.
Every field is 4 bytes (u32 or f32), little-endian; a uniform struct is padded with zero words to a
multiple of 16 bytes (WGSL's uniform layout rule for structs of scalars).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum


class DraftKind(IntEnum):
    """How a round's draft rows are laid out (Verify.draft_kind)."""

    FULL_ROWS = 1  # q f32 [k, V]
    REDUCED_ROWS = 2  # q f32 [k, Q] over the token ids in id_map u32 [Q]
    POINT_MASSES = 3  # no q rows: draft i puts probability 1 on tokens[1 + i]


class ResultKind(IntEnum):
    """How the round's terminal token was drawn (VerifyResult.kind)."""

    SAMPLE = 0  # k = 0: a plain sample from row 0
    BONUS = 1  # all k drafts accepted: sampled from row k
    CORRECTION = 2  # first rejection at row A: the residual norm([p - q]+) (greedy: row A's argmax)


class Status(IntEnum):
    """Why a round failed (VerifyResult.status); OK otherwise."""

    OK = 0
    TARGET_NUMERIC = 1  # a processed target row is no distribution (NaN logits, every token masked)
    RESIDUAL_MASS = 2  # the residual's mass is at or below acceptance.FLOAT_RESIDUAL_FLOOR
    DRAFT_NUMERIC = 3  # the draft gave its own token a probability that is not > 0


# WGSL constant prefixes of the codes above: e.g. DraftKind.REDUCED_ROWS -> DRAFT_REDUCED_ROWS.
CODE_PREFIXES = {DraftKind: "DRAFT_", ResultKind: "RESULT_", Status: "STATUS_"}
FORMATS = {"u32": "I", "f32": "f"}


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # "u32" | "f32"
    doc: str = ""


class Struct:
    """A struct of 4-byte scalars shared by Python (pack / unpack) and WGSL (wgsl)."""

    def __init__(self, name: str, fields: list[Field], align: int = 16):
        pads = -len(fields) % (align // 4)
        self.name = name
        self.fields = list(fields) + [Field(f"pad{i}", "u32") for i in range(pads)]
        self.names = [f.name for f in fields]  # the fields a caller sets (pads are zero)
        self.format = "<" + "".join(FORMATS[f.type] for f in self.fields)
        self.size = struct.calcsize(self.format)

    def pack(self, **values) -> bytes:
        unknown, missing = set(values) - set(self.names), set(self.names) - set(values)
        if unknown or missing:
            raise TypeError(f"{self.name}.pack: unknown fields {sorted(unknown)}, missing {sorted(missing)}")
        return struct.pack(self.format, *(values.get(f.name, 0) for f in self.fields))

    def unpack(self, data: bytes) -> dict:
        values = struct.unpack(self.format, bytes(data[: self.size]))
        return {f.name: v for f, v in zip(self.fields, values) if f.name in self.names}

    def wgsl(self) -> str:
        lines = [f"struct {self.name} {{"]
        for f in self.fields:
            lines.append(f"    {f.name}: {f.type},{f'  // {f.doc}' if f.doc else ''}")
        return "\n".join(lines + ["};"])


PARAMS = Struct(
    "Params",
    [  # every forward kernel; written once per call
        Field("rows", "u32", "T: query rows of this call"),
        Field("position", "u32", "absolute position of row 0"),
    ],
)
SHAPE = Struct(
    "Shape",
    [  # a matmul's weight shape and where its outputs go; one buffer per distinct value, written at load
        Field("k", "u32", "input features (the reduction length)"),
        Field("n", "u32", "output features"),
        Field("y_stride", "u32", "elements from one output row to the next (n, or more in a shared buffer)"),
        Field("y_offset", "u32", "output column 0's element in row 0 (its place in a shared buffer)"),
    ],
)
REPACK = Struct(
    "Repack",
    [  # repack.wgsl: one tensor's job
        Field("blocks", "u32", "GGUF blocks in the tensor"),
        Field("groups_x", "u32", "workgroups along x (the grid wraps into y past the dispatch limit)"),
    ],
)
VERIFY = Struct(
    "Verify",
    [  # verify.wgsl: one round's settings
        Field("drafts", "u32", "k"),
        Field("greedy", "u32", "1: temperature 0"),
        Field("draft_kind", "u32", "a DraftKind"),
        Field("reduced", "u32", "Q, the ids per reduced row (0 otherwise)"),
        Field("temperature", "f32"),
        Field("top_p", "f32", "1: off"),
        Field("penalty", "f32", "repetition penalty, 1: off"),
        Field("top_k", "u32", "0: off"),
        Field("seed_lo", "u32", "Philox key, low word"),
        Field("seed_hi", "u32", "Philox key, high word"),
        Field("round", "u32", "the request's round index (Philox counter)"),
        Field("token", "u32", "the context index of the token row 0 draws (TOKEN_SAMPLE's Philox counter)"),
    ],
)
VERIFY_RESULT = Struct(
    "VerifyResult",
    [  # verify.wgsl's output: all a round reads back
        Field("accepted", "u32", "A, drafts accepted"),
        Field("terminal", "u32", "the token drawn after them"),
        Field("kind", "u32", "a ResultKind"),
        Field("status", "u32", "a Status"),
        Field("rows", "u32", "rows processed"),
    ],
    align=4,
)
STRUCTS = (PARAMS, SHAPE, REPACK, VERIFY, VERIFY_RESULT)
RESULT_BYTES = VERIFY_RESULT.size


def wgsl_declarations() -> str:
    """The contract as WGSL: every struct, and every code as `const <PREFIX><NAME>: u32`."""
    parts = [s.wgsl() for s in STRUCTS]
    for enum, prefix in CODE_PREFIXES.items():
        parts += [f"const {prefix}{member.name}: u32 = {member.value}u;" for member in enum]
    return "// Generated from pyodide_app/kernel_abi.py.\n" + "\n".join(parts) + "\n"
