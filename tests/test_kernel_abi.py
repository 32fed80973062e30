"""The Python <-> WGSL binary contract (pyodide_app/kernel_abi.py): one definition, used by both sides.

Catches: a field added to a struct on one side only (the kernels no longer declare their own structs, and
no literal code may stand in for a named one), pack() silently taking a misspelt or missing field, and a
layout that is not WGSL's (uniform structs padded to 16 bytes; f32 fields packed as floats).
"""

from __future__ import annotations

import re
import struct

import pytest

from pyodide_app.kernel_abi import PARAMS, RESULT_BYTES, STRUCTS, VERIFY, VERIFY_RESULT, DraftKind, wgsl_declarations

from .conftest import ROOT

SHADERS = sorted((ROOT / "shaders").glob("*.wgsl"))


def test_kernels_declare_no_struct_of_the_contract():
    for path in SHADERS:
        declared = set(re.findall(r"^struct (\w+)", path.read_text(), re.M))
        assert not declared & {s.name for s in STRUCTS}, f"{path.name} redeclares {declared}"


def test_verify_kernel_names_every_code():
    source = (ROOT / "shaders" / "verify.wgsl").read_text()
    assert not re.search(r"draft_kind == \d", source), "a draft kind written as a literal"
    assert not re.search(r"finish\(lane, [^;]*, \d+u, \d+u, ", source), "a result kind or status written as a literal"


def test_pack_uses_wgsl_layout():
    assert PARAMS.size == 16 and VERIFY.size == 48 and RESULT_BYTES == VERIFY_RESULT.size == 20
    data = VERIFY.pack(
        drafts=3,
        greedy=0,
        draft_kind=DraftKind.REDUCED_ROWS,
        reduced=7,
        temperature=0.7,
        top_p=0.9,
        penalty=1.1,
        top_k=40,
        seed_lo=5,
        seed_hi=6,
        round=9,
        token=11,
    )
    words = struct.unpack("<4I3fI4I", data)
    assert words[:4] == (3, 0, 2, 7) and words[7:] == (40, 5, 6, 9, 11)
    assert words[4] == pytest.approx(0.7) and words[6] == pytest.approx(1.1)
    result = VERIFY_RESULT.unpack(struct.pack("<5I", 2, 17, 1, 0, 3))
    assert result == {"accepted": 2, "terminal": 17, "kind": 1, "status": 0, "rows": 3}


def test_pack_refuses_unknown_and_missing_fields():
    with pytest.raises(TypeError, match="unknown fields \\['rowz'\\], missing \\['rows'\\]"):
        PARAMS.pack(rowz=1, position=0)


def test_declarations_hold_every_struct_and_code():
    """What the kernels are compiled with (the GPU champion tests compile every kernel with it)."""
    declarations = wgsl_declarations()
    for s in STRUCTS:
        assert s.wgsl() in declarations
    assert (
        "const DRAFT_POINT_MASSES: u32 = 3u;" in declarations
        and "const STATUS_DRAFT_NUMERIC: u32 = 3u;" in declarations
    )
    assert "const RESULT_CORRECTION: u32 = 2u;" in declarations
