// The smallest useful client of spec-chat.js: load, stream an answer, stop it, show what speculation did.
import { createEngine } from "../spec-chat.js";

const $ = (id) => document.getElementById(id);
const engine = await createEngine({
  onProgress: ({ phase, done, total }) => { $("status").textContent = `Loading (${phase}): ${Math.round((100 * done) / (total || 1))}%`; },
});
window.specChatEngine = engine;  // to try it from the browser's console
$("status").textContent = `Ready: ${engine.info().model} on ${engine.info().backend}`;
$("ask").disabled = false;

let controller = null;
$("stop").onclick = () => controller?.abort();
$("ask").onclick = async () => {
  controller = new AbortController();
  $("ask").disabled = true;
  $("stop").disabled = false;
  $("answer").textContent = "";
  try {
    const chunks = await engine.chat.completions.create({
      messages: [{ role: "user", content: $("question").value }],
      stream: true, max_tokens: 128, temperature: 0, signal: controller.signal,
    });
    for await (const chunk of chunks) {
      $("answer").textContent += chunk.choices[0].delta.content ?? "";
      if (chunk.speculative) {
        const s = chunk.speculative;
        $("stats").textContent = `${chunk.usage.completion_tokens} tokens · ${s.proposer} · accepted ${s.accepted}/${s.proposed}`;
      }
    }
  } catch (error) {
    $("stats").textContent = error.name === "AbortError" ? "Stopped." : `Error ${error.code ?? ""}: ${error.message}`;
  }
  $("ask").disabled = false;
  $("stop").disabled = true;
};
