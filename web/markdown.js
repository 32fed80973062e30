// markdown.js — a small, safe Markdown renderer: builds DOM nodes with textContent only, so no HTML
// from the model ever runs. Supports fenced code blocks, headings, bullet/numbered lists, paragraphs,
// **bold**, *italic* and `inline code`. Links and images stay plain text (the page is offline anyway).
// A code block gets a line above it naming its language, with a Copy button.
import { copyButton } from "./clipboard.js";

export function renderMarkdown(text, container) {
  container.replaceChildren();
  const lines = text.split("\n");
  let i = 0;
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) container.append(block("p", paragraph.join("\n")));
    paragraph = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+-]*)/);
    if (fence) {
      flush();
      const code = [];
      i++;
      while (i < lines.length && !/^\s*```/.test(lines[i])) code.push(lines[i++]);
      i++;  // closing fence (or end of the streamed text so far)
      const pre = document.createElement("pre");
      const element = document.createElement("code");
      if (fence[1]) element.dataset.language = fence[1];
      element.textContent = code.join("\n");
      pre.append(element);
      const head = document.createElement("div");
      head.className = "code-head";
      head.append(Object.assign(document.createElement("span"), { textContent: fence[1] || "code" }),
        copyButton("Copy", element.textContent, `Copy the ${fence[1] || ""} code`.replace("  ", " ")));
      container.append(head, pre);
      continue;
    }
    const heading = line.match(/^(#{1,4})\s+(.*)/);
    const bullet = line.match(/^\s*(?:[-*+]|(\d+)[.)])\s+(.*)/);
    if (heading) {
      flush();
      container.append(block(`h${Math.min(6, heading[1].length + 2)}`, heading[2]));
    } else if (bullet) {
      flush();
      const ordered = Boolean(bullet[1]);
      const list = document.createElement(ordered ? "ol" : "ul");
      while (i < lines.length) {
        const item = lines[i].match(/^\s*(?:[-*+]|(\d+)[.)])\s+(.*)/);
        if (!item || Boolean(item[1]) !== ordered) break;
        list.append(block("li", item[2]));
        i++;
      }
      container.append(list);
      continue;
    } else if (line.trim() === "") {
      flush();
    } else {
      paragraph.push(line);
    }
    i++;
  }
  flush();
}

function block(tag, text) {
  const element = document.createElement(tag);
  appendInline(element, text);
  return element;
}

// **bold**, *italic*, `code`; everything else is text.
function appendInline(parent, text) {
  const pattern = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*\s][^*]*\*)/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) parent.append(document.createTextNode(text.slice(last, match.index)));
    const token = match[0];
    const element = document.createElement(token.startsWith("`") ? "code" : token.startsWith("**") ? "strong" : "em");
    element.textContent = token.startsWith("**") ? token.slice(2, -2) : token.slice(1, -1);
    parent.append(element);
    last = match.index + token.length;
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}
