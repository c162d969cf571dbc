/* The scanner page's service worker (docs/redemption.md); CACHE, SHELL and PAGE are written
   above this line by services/api/pages/scanner.py. It keeps the app shell (the page, its
   script, style, icon and decoder), so an installed scanner starts without waiting on the
   network, and nothing else: scans and every other request go to Tessera, never to a cache. */

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(SHELL))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) =>
        Promise.all(
          names
            .filter((name) => name.startsWith("tessera-scan-") && name !== CACHE)
            .map((name) => caches.delete(name)),
        ),
      )
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (request.mode === "navigate" && url.pathname === PAGE) {
    // The network first, so an updated page shows at once; the kept copy when offline.
    event.respondWith(fetch(request).catch(() => caches.match(PAGE, { ignoreSearch: true })));
    return;
  }
  // Only the shell's own versioned URLs come from the cache; anything else is not touched.
  if (!SHELL.includes(url.pathname + url.search)) return;
  event.respondWith(caches.match(request).then((kept) => kept || fetch(request)));
});
