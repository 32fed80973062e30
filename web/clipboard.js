// clipboard.js — a Copy button: copies text, then says whether it worked (for a few seconds).
export function copyButton(label, text, name = label) {
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.setAttribute("aria-label", name);
  button.onclick = async () => {
    try {
      await navigator.clipboard.writeText(typeof text === "function" ? text() : text);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";  // no clipboard permission (or not a secure context)
    }
    setTimeout(() => { button.textContent = label; }, 2000);
  };
  return button;
}
