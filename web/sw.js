// sw.js — offline: precache the app shell, the vendored runtimes, the orchestrator and the model
// manifest at install; model files are cached by the worker (Cache API, hash-checked) and served from
// there. Same-origin GETs go to the network first (so a rebuilt site is picked up) and fall back to the
// caches when the network is off; nothing is ever fetched from another origin.
const APP_CACHE = "spec-chat-app";

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const site = await (await fetch("vendor/site.json", { cache: "no-store" })).json();
    const cache = await caches.open(`${APP_CACHE}-${site.version}`);
    await cache.addAll(["./", "vendor/site.json", `${site.model}manifest.json`, ...site.app_files]);
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    const site = await (await caches.match("vendor/site.json"))?.json().catch(() => null);
    for (const name of await caches.keys()) {
      if (name.startsWith(APP_CACHE) && site && name !== `${APP_CACHE}-${site.version}`) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.origin !== self.location.origin) return;
  event.respondWith((async () => {
    try {
      return await fetch(event.request);
    } catch (offline) {
      const cached = await caches.match(event.request, { ignoreSearch: true });
      if (cached) return cached;
      throw offline;
    }
  })());
});
