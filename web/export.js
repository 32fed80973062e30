// export.js — a conversation as a file the user keeps: Markdown for reading, JSON with everything stored.

export function toMarkdown(conversation) {
  const lines = [`# ${conversation.title}`, ""];
  if (conversation.system) lines.push(`**System prompt:** ${conversation.system}`, "");
  for (const message of conversation.messages) {
    lines.push(`## ${message.role === "user" ? "You" : "Assistant"}`, "", message.content, "");
  }
  return lines.join("\n");
}

export function toJson(conversation) {
  return JSON.stringify({ format: "spec-chat-conversation", version: 1, ...conversation }, null, 1);
}

// Saves text as a file through the browser's download (a blob: URL of this page; nothing is sent anywhere).
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.append(link);
  link.click();
  setTimeout(() => { link.remove(); URL.revokeObjectURL(url); }, 10_000);  // Firefox starts the download later
}

export function fileName(conversation, extension) {
  const stem = conversation.title.replace(/[^\p{L}\p{N}]+/gu, "-").replace(/^-|-$/g, "").slice(0, 40) || "conversation";
  return `${stem}.${extension}`;
}
