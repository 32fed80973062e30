// Runs Python code inside real Pyodide (the npm package, under Node) with the
// given files written into its file system. Input on stdin, as JSON:
//   {"files": {"<path under /app>": "<text>"}, "code": "<python>"}
// The code must assign a JSON string to `result`; it is printed on stdout. web/row_processing.js is
// globalThis.rowProcessing.
import { loadPyodide } from "pyodide";
import { readFileSync } from "node:fs";

const request = JSON.parse(readFileSync(0, "utf8"));
// The page's row processing, for probes that hand Python what onnx_session.js would (run_js reads it here).
globalThis.rowProcessing = await import(new URL("../web/row_processing.js", import.meta.url));
const pyodide = await loadPyodide({ stdout: (line) => process.stderr.write(line + "\n") });
for (const [path, text] of Object.entries(request.files)) {
  const full = `/app/${path}`;
  pyodide.FS.mkdirTree(full.slice(0, full.lastIndexOf("/")));
  pyodide.FS.writeFile(full, text);
}
pyodide.runPython("import sys; sys.path.insert(0, '/app')");
pyodide.runPython(request.code);
process.stdout.write(pyodide.globals.get("result"));
