"""Native-only bindings (wgpu-py, onnxruntime). Never imported inside Pyodide."""
