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
            "/", "/api.js", "/app.js", "/app.css", "/queue.js", "/push.js", "/favicon.svg", "/manifest.webmanifest",
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
            // An alert (§16) pushed by the service (§17): its title and message, shown.
            self.addEventListener("push", (event) => {
              let alert = {};
              try {
                alert = event.data ? event.data.json() : {};
              } catch (e) {
                alert = { message: event.data ? event.data.text() : "" };
              }
              event.waitUntil(self.registration.showNotification(alert.title || "Coffee Tracker", {
                body: alert.message || "", tag: alert.rule || "coffee-tracker", icon: "/icon-192.png",
                data: { id: alert.id || null },
              }));
            });
            // A click opens the page, or brings it forward.
            self.addEventListener("notificationclick", (event) => {
              event.notification.close();
              event.waitUntil(self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((pages) => {
                const page = pages.find((p) => new URL(p.url).pathname === "/");
                return page ? page.focus() : self.clients.openWindow("/");
              }));
            });
            self.addEventListener("sync", (event) => {
              if (event.tag !== "send-taps") return;
              event.waitUntil(CoffeeQueue.send().then((outcome) =>
                self.clients.matchAll().then((pages) => pages.forEach((page) =>
                  page.postMessage({ kind: "taps-sent", outcome: outcome })))));
            });

            """
    }

    /// `/api.js`: one call to the JSON API (§12) with the login cookie, for
    /// every page: its reply, or an `Error` with the reason, `unreachable`
    /// when no answer came (a proxy's 502, 503 or 504 counts as none, §17),
    /// `field` when the service named one, and `status`.
    static let apiScript = """
        "use strict";
        self.CoffeeAPI = async function (method, path, body) {
          const init = { method: method, credentials: "same-origin", headers: {} };
          if (body !== undefined) {
            init.headers["Content-Type"] = "application/json";
            init.body = JSON.stringify(body);
          }
          const unreachable = () => Object.assign(new Error("the service cannot be reached"), { unreachable: true });
          let response;
          try {
            response = await fetch(path, init);
          } catch (e) {
            throw unreachable();
          }
          if ([502, 503, 504].includes(response.status)) throw unreachable();
          let reply = null;
          try { reply = await response.json(); } catch (e) { /* not JSON */ }
          if (!response.ok || !reply || reply.ok !== true) {
            const error = reply && reply.error ? reply.error : {};
            const why = error.message || "HTTP " + response.status;
            const message = response.status === 401 ? "log in first (a link from coffee-tracker token NAME --link)"
              : response.status === 403 ? "not allowed: " + why : why;
            throw Object.assign(new Error(message), { status: response.status, field: error.field });
          }
          return reply;
        };

        """

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

    /// `/push.js`: the page's button that asks the browser to be told by Web
    /// Push, registers the subscription with the service, and takes it back.
    static let pushScript = """
        "use strict";
        (function () {
          const button = document.getElementById("notify");
          if (!button || !("serviceWorker" in navigator) || !("PushManager" in window)) return;
          const say = (text) => { document.getElementById("notify-state").textContent = text; };
          function bytes(base64url) {
            const text = atob(base64url.replace(/-/g, "+").replace(/_/g, "/"));
            return Uint8Array.from(text, (c) => c.charCodeAt(0));
          }
          const call = CoffeeAPI;  // /api.js
          async function show() {
            const registration = await navigator.serviceWorker.ready;
            const subscription = await registration.pushManager.getSubscription();
            button.textContent = subscription ? "Stop telling this phone" : "Tell me on this phone";
            button.hidden = false;
            return subscription;
          }
          button.addEventListener("click", async () => {
            button.disabled = true;
            try {
              const registration = await navigator.serviceWorker.ready;
              const held = await registration.pushManager.getSubscription();
              if (held) {
                const id = localStorage.getItem("coffee-tracker-push-id");
                if (id) await call("DELETE", "/api/v1/push/subscriptions/" + id);
                await held.unsubscribe();
                localStorage.removeItem("coffee-tracker-push-id");
                say("This phone is no longer told.");
              } else {
                if ((await Notification.requestPermission()) !== "granted") throw new Error("notifications are not allowed");
                const key = (await call("GET", "/api/v1/push/key")).publicKey;
                const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: bytes(key) });
                const reply = await call("POST", "/api/v1/push/subscriptions", subscription.toJSON());
                localStorage.setItem("coffee-tracker-push-id", reply.id);
                say("This phone is told of alerts.");
              }
            } catch (e) {
              say("Not changed: " + e.message);
            }
            button.disabled = false;
            show();
          });
          show().catch(() => { /* no worker yet: the button stays hidden */ });
        })();

        """
}
