// store.js — conversations kept on this device (IndexedDB), and what the site stores in all.
//
// A conversation: {id, title, autoTitle (the title follows the first message until renamed), system,
//                  created, updated (ms since 1970), messages: [Message]}
// A Message: {role: "user" | "assistant", content, and for answers: tokens (exact ids), finish, seed, stats}
// Nothing here leaves the device; the model files live in the Cache API (worker.js), settings in localStorage.

const DB_NAME = "spec-chat";
const STORE = "conversations";
export const MODEL_CACHE = "spec-chat-model-v1";  // worker.js keeps the model files here
const CURRENT_KEY = "spec-chat.current";  // localStorage: the id of the open conversation

let opened = null;

function database() {
  opened ??= new Promise((resolve, reject) => {
    const request = indexedDB.open(DB_NAME, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE, { keyPath: "id" });
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  return opened;
}

async function transact(mode, work) {
  const db = await database();
  return new Promise((resolve, reject) => {
    const tx = db.transaction(STORE, mode);
    const result = work(tx.objectStore(STORE));
    tx.oncomplete = () => resolve(result.result);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error || new Error("the browser refused to store the conversation"));
  });
}

export function newConversation() {
  const now = Date.now();
  return { id: crypto.randomUUID(), title: "New chat", autoTitle: true, system: "", created: now, updated: now, messages: [] };
}

// Newest first.
export async function listConversations() {
  const all = await transact("readonly", (store) => store.getAll());
  return all.sort((a, b) => b.updated - a.updated);
}

export const getConversation = (id) => transact("readonly", (store) => store.get(id));
export const saveConversation = (conversation) => transact("readwrite", (store) => store.put(conversation));
export const deleteConversation = (id) => transact("readwrite", (store) => store.delete(id));

export const currentId = () => localStorage.getItem(CURRENT_KEY);
export const setCurrentId = (id) => localStorage.setItem(CURRENT_KEY, id);

// Bytes this site holds: {model (Cache API), conversations (IndexedDB, approximate), total (the browser's
// estimate for the whole origin, or null), persisted (whether the browser promised not to evict it)}.
export async function storageReport() {
  let model = 0;
  if (await caches.has(MODEL_CACHE)) {  // (opening it would create it)
    const cache = await caches.open(MODEL_CACHE);
    for (const request of await cache.keys()) model += (await (await cache.match(request)).blob()).size;  // disk-backed
  }
  const conversations = new Blob([JSON.stringify(await listConversations())]).size;
  const estimate = navigator.storage?.estimate ? await navigator.storage.estimate() : null;
  const persisted = navigator.storage?.persisted ? await navigator.storage.persisted() : false;
  return { model, conversations, total: estimate?.usage ?? null, persisted };
}

export async function clearModelFiles() {
  await caches.delete(MODEL_CACHE);
}

export async function clearConversations() {
  await transact("readwrite", (store) => store.clear());
  localStorage.removeItem(CURRENT_KEY);
}

// Ask the browser not to evict the ~200 MB model under storage pressure (it may say no).
export async function askPersistence() {
  if (!navigator.storage?.persist) return false;
  return (await navigator.storage.persisted()) || navigator.storage.persist();
}
