"""Orchestrator of exact speculative decoding. Standard library only: runs in Pyodide and CPython."""
