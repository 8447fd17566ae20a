import CoffeeCharts
import CoffeeDomain

/// What makes the live page an app a phone installs (docs/protocol.md §17):
/// the manifest, the service worker that keeps the page's shell, and the
/// queue of taps that could not be sent, which the page and the worker share.
extension LivePage {
    /// Bumped when the shell's files change, so that the worker's cache is replaced.
    static let shellVersion = "1"

    /// The files the worker keeps, answered from its cache when the network is not there.
    static let shellFiles =
        [
            "/", "/app.js", "/app.css", "/queue.js", "/favicon.svg", "/manifest.webmanifest",
        ] + AppIcon.sizes.map { "/icon-\($0).png" }

    /// `/manifest.webmanifest`.
    static let manifest = JSONValue.object([
        ("name", "Coffee Tracker"), ("short_name", "Coffee"), ("id", "/"), ("start_url", "/"), ("scope", "/"),
        ("display", "standalone"), ("background_color", "#f5f7f8"), ("theme_color", "#2e7d32"),
        (
            "icons",
            .array(
                AppIcon.sizes.map { size in
                    .object([
                        ("src", .string("/icon-\(size).png")), ("sizes", .string("\(size)x\(size)")),
                        ("type", "image/png"), ("purpose", "any maskable"),
                    ])
                })
        ),
    ]).serialized()

    /// The icons by path, drawn once.
    static let icons: [String: [UInt8]] = Dictionary(
        uniqueKeysWithValues: AppIcon.sizes.map { ("/icon-\($0).png", AppIcon.png(size: $0)) })

    /// `/sw.js`: the shell from the network first, from its cache when the
    /// network fails; nothing else is answered from the cache. Background
    /// Sync (`send-taps`) sends the queue from here too.
    static var serviceWorker: String {
        let files = JSONValue.array(shellFiles.map { .string($0) }).serialized()
        return """
            "use strict";
            importScripts("/queue.js");
            const SHELL = "coffee-tracker-shell-\(shellVersion)";
            const FILES = \(files);
            self.addEventListener("install", (event) => {
              event.waitUntil(caches.open(SHELL).then((cache) => cache.addAll(FILES)).then(() => self.skipWaiting()));
            });
            self.addEventListener("activate", (event) => {
              event.waitUntil(caches.keys()
                .then((names) => Promise.all(names
                  .filter((name) => name.startsWith("coffee-tracker-shell-") && name !== SHELL)
                  .map((name) => caches.delete(name))))
                .then(() => self.clients.claim()));
            });
            self.addEventListener("fetch", (event) => {
              const url = new URL(event.request.url);
              if (event.request.method !== "GET" || url.origin !== self.location.origin) return;
              const path = url.pathname === "/index.html" ? "/" : url.pathname;
              if (!FILES.includes(path)) return;
              event.respondWith(fetch(event.request)
                .then((response) => {
                  if (response.ok && !response.redirected) {
                    const copy = response.clone();
                    event.waitUntil(caches.open(SHELL).then((cache) => cache.put(path, copy)));
                  }
                  return response;
                })
                .catch(() => caches.open(SHELL)
                  .then((cache) => cache.match(path))
                  .then((cached) => cached || Response.error())));
            });
            self.addEventListener("sync", (event) => {
              if (event.tag !== "send-taps") return;
              event.waitUntil(CoffeeQueue.send().then((outcome) =>
                self.clients.matchAll().then((pages) => pages.forEach((page) =>
                  page.postMessage({ kind: "taps-sent", outcome: outcome })))));
            });

            """
    }

    /// `/queue.js`: the taps kept in IndexedDB, sent oldest first with their
    /// own UUID, type and time (§17), for the page and the worker alike.
    static let queueScript = """
        "use strict";
        (function (scope) {
          const DATABASE = "coffee-tracker";
          const TAPS = "taps";
          // No answer, or an answer that says "later": the tap stays.
          const KEEP = [401, 408, 429, 502, 503, 504];
          function request(r) {
            return new Promise((resolve, reject) => {
              r.onsuccess = () => resolve(r.result);
              r.onerror = () => reject(r.error);
            });
          }
          function open() {
            const r = indexedDB.open(DATABASE, 1);
            r.onupgradeneeded = () => r.result.createObjectStore(TAPS, { keyPath: "uuid" });
            return request(r);
          }
          async function withTaps(mode, body) {
            const db = await open();
            try {
              const tx = db.transaction(TAPS, mode);
              const done = new Promise((resolve, reject) => {
                tx.oncomplete = resolve;
                tx.onerror = () => reject(tx.error);
                tx.onabort = () => reject(tx.error);
              });
              const value = await body(tx.objectStore(TAPS));
              await done;
              return value;
            } finally {
              db.close();
            }
          }
          let sending = null;
          const queue = {
            add: (tap) => withTaps("readwrite", (taps) => request(taps.put(tap))),
            remove: (uuid) => withTaps("readwrite", (taps) => request(taps.delete(uuid))),
            all: () => withTaps("readonly", (taps) => request(taps.getAll()))
              .then((all) => all.sort((a, b) => (a.date < b.date ? -1 : a.date > b.date ? 1 : 0))),
            // Sends the taps oldest first, each with its own UUID and time; stops
            // at the first that gets no answer. {sent: [tap], refused: [{tap, reason}], left: n}
            send: () => {
              if (!sending) sending = sendAll().finally(() => { sending = null; });
              return sending;
            },
          };
          async function sendAll() {
            const taps = await queue.all();
            const outcome = { sent: [], refused: [], left: 0 };
            for (let i = 0; i < taps.length; i++) {
              const tap = taps[i];
              let response = null;
              try {
                response = await fetch("/api/v1/drinks", {
                  method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
                  body: JSON.stringify({ uuid: tap.uuid, type: tap.type, date: tap.date }),
                });
              } catch (e) {
                response = null;
              }
              if (!response || KEEP.includes(response.status)) {
                outcome.left = taps.length - i;
                break;
              }
              let reply = null;
              try { reply = await response.json(); } catch (e) { /* not JSON */ }
              await queue.remove(tap.uuid);
              if (response.ok && reply && reply.ok === true) {
                outcome.sent.push(tap);
              } else {
                outcome.refused.push({ tap: tap, reason: reply && reply.error ? reply.error.message : "HTTP " + response.status });
              }
            }
            return outcome;
          }
          scope.CoffeeQueue = queue;
        })(self);

        """
}
