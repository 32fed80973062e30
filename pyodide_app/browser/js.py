"""Small helpers for values that cross from JavaScript."""

from __future__ import annotations


def present(value) -> bool:
    """False for Python None and for JS null (Pyodide's JsNull), which is not None."""
    return value is not None and type(value).__name__ != "JsNull"


def ffi():
    """pyodide.ffi, imported on first use (so the binding imports in CPython too)."""
    from pyodide import ffi as module  # type: ignore[import-not-found]

    return module
