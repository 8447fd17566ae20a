extension LivePage {
    /// `/app.js`: draws each published model, logs a tapped drink, takes
    /// the last one back, and corrects a drink of the last 24 hours
    /// (docs/protocol.md §10, §15). The writes go to the JSON API with the
    /// login cookie (same origin: the browser sends `Origin`); the level
    /// moves when the model the commit publishes arrives on `/events`.
    static let script = """
        "use strict";
        // Redraws on each `model` the service publishes (server-sent events from
        // /events); the browser reconnects by itself after a restart. A model of
        // another store or epoch (a restore, a promotion: docs/protocol.md §13)
        // means nothing drawn before holds: everything is drawn again, and the
        // page says so once.
        (function () {
          const $ = (id) => document.getElementById(id);
          let shown = null;
          let history = null;
          let changedHistory = false;
          let listed = null;
          const logged = [];  // UUIDs this page logged, the last one first to undo
          const OFFLINE = "offline: taps are kept and sent when the network is back";
          function draw(model) {
            const of = model.store + "/" + model.epoch;
            if (history !== null && of !== history) {
              shown = null;
              changedHistory = true;
              console.warn("the store changed (" + of + ", was " + history + "): drawn again from the start");
            }
            history = of;
            $("mg").textContent = Math.round(model.mgCaffeine);
            $("level").textContent = model.level;
            $("level").className = "value level " + model.level;
            $("cups").textContent = model.cupsToday.toFixed(1);
            $("drinks").textContent = model.drinksToday;
            $("anchor").textContent = model.anchor;
            $("at").textContent = new Date(model.at).toLocaleTimeString();
            const key = of + "/" + model.anchor + "/" + model.at;
            if (key !== shown) {
              shown = key;
              $("curve").src = "/model.svg?anchor=" + model.anchor + "&at=" + encodeURIComponent(model.at);
            }
            if (listed !== of + "/" + model.anchor) {
              listed = of + "/" + model.anchor;
              refreshList();
            }
          }

          // A version-4 UUID; crypto.randomUUID exists only in secure contexts.
          function newUUID() {
            if (crypto.randomUUID) return crypto.randomUUID().toUpperCase();
            const b = crypto.getRandomValues(new Uint8Array(16));
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
            return (h.slice(0, 8) + "-" + h.slice(8, 12) + "-" + h.slice(12, 16) + "-" + h.slice(16, 20) + "-" + h.slice(20)).toUpperCase();
          }

          function say(text, isError) {
            $("message").textContent = text;
            $("message").className = isError ? "message error" : "message";
          }

          const api = CoffeeAPI;  // /api.js

          function labelOf(button) { return button.querySelector(".name").textContent; }

          // "2 waiting to send": the taps the queue keeps (docs/protocol.md §17).
          async function showWaiting() {
            const count = (await CoffeeQueue.all()).length;
            $("waiting").textContent = count === 0 ? "" : count + " waiting to send";
            $("waiting").hidden = count === 0;
            return count;
          }

          // Sends what the queue keeps: on `online`, at the page's open, when
          // its event stream connects again (the worker's Background Sync too).
          async function sendWaiting() {
            try {
              const outcome = await CoffeeQueue.send();
              told(outcome);
            } catch (e) {
              console.warn("the waiting taps could not be read", e);
            }
            await showWaiting();
          }

          function told(outcome) {
            if (outcome.sent.length > 0) say("Sent " + outcome.sent.length + " waiting tap" + (outcome.sent.length === 1 ? "" : "s") + ".", false);
            outcome.refused.forEach((r) => say("Not logged: " + r.reason, true));
            if (outcome.sent.length > 0) refreshList();
          }

          async function logDrink(button) {
            // The tap's own time: a tap sent later is dated when it was made.
            const drink = { uuid: newUUID(), type: button.dataset.type, date: new Date().toISOString() };
            button.disabled = true;
            try {
              await api("POST", "/api/v1/drinks", drink);
              logged.unshift({ uuid: drink.uuid, label: labelOf(button) });
              $("undo").disabled = false;
              say("Logged " + labelOf(button).toLowerCase() + ", " + button.dataset.mg + " mg.", false);
            } catch (e) {
              if (e.unreachable) {
                await CoffeeQueue.add(Object.assign({ label: labelOf(button), mg: Number(button.dataset.mg) }, drink));
                logged.unshift({ uuid: drink.uuid, label: labelOf(button) });
                $("undo").disabled = false;
                say("Kept " + labelOf(button).toLowerCase() + ": it is sent when the network is back.", false);
                await showWaiting();
                navigator.serviceWorker && navigator.serviceWorker.ready
                  .then((registration) => registration.sync && registration.sync.register("send-taps"))
                  .catch(() => { /* no Background Sync: `online` and the next open send it */ });
              } else {
                say("Not logged: " + e.message, true);
              }
            } finally {
              button.disabled = false;
            }
          }

          async function undo() {
            const last = logged[0];
            if (!last) return;
            $("undo").disabled = true;
            try {
              // Still queued: taken out of the queue, and nothing is sent.
              const queued = (await CoffeeQueue.all()).some((tap) => tap.uuid === last.uuid);
              if (queued) {
                await CoffeeQueue.remove(last.uuid);
                await showWaiting();
              } else {
                await api("DELETE", "/api/v1/drinks/" + last.uuid);
              }
              logged.shift();
              say("Took back the " + last.label.toLowerCase() + ".", false);
            } catch (e) {
              say("Not undone: " + e.message, true);
            }
            $("undo").disabled = logged.length === 0;
          }

          // A datetime-local field's value for `date`, in the browser's time zone.
          function localInput(date) {
            const d = new Date(date.getTime() - date.getTimezoneOffset() * 60000);
            return d.toISOString().slice(0, 16);
          }

          function describe(drink) {
            const named = Array.from(document.querySelectorAll("#drink-buttons .drink"))
              .find((b) => b.dataset.type === drink.type);
            if (named) return labelOf(named);
            if (!drink.type) return "Drink";
            const words = drink.type.replace(/([A-Z])/g, " $1").toLowerCase();
            return words.charAt(0).toUpperCase() + words.slice(1);
          }

          function row(drink) {
            const item = document.createElement("li");
            item.dataset.uuid = drink.uuid;
            const when = document.createElement("span");
            when.className = "when";
            when.textContent = new Date(drink.date).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
            const what = document.createElement("span");
            what.className = "what";
            what.textContent = describe(drink) + " · " + Math.round(drink.mgCaffeine * 10) / 10 + " mg";
            const edit = document.createElement("button");
            edit.type = "button";
            edit.className = "edit";
            edit.textContent = "Edit";
            edit.setAttribute("aria-label", "Edit " + what.textContent + " at " + when.textContent);
            edit.addEventListener("click", () => editor(item, drink));
            item.append(when, what, edit);
            return item;
          }

          // The drink's time and mg in a form; saved as the next version (§1's upsert).
          function editor(item, drink) {
            const form = document.createElement("form");
            const date = document.createElement("input");
            date.type = "datetime-local";
            date.required = true;
            date.value = localInput(new Date(drink.date));
            date.setAttribute("aria-label", "time");
            const mg = document.createElement("input");
            mg.type = "number";
            mg.min = "0.1";
            mg.step = "any";
            mg.required = true;
            mg.value = drink.mgCaffeine;
            mg.setAttribute("aria-label", "mg");
            const save = document.createElement("button");
            save.type = "submit";
            save.textContent = "Save";
            const cancel = document.createElement("button");
            cancel.type = "button";
            cancel.textContent = "Cancel";
            cancel.addEventListener("click", () => item.replaceWith(row(drink)));
            form.append(date, mg, save, cancel);
            form.addEventListener("submit", async (event) => {
              event.preventDefault();
              const edited = { uuid: drink.uuid, version: (drink.version || 1) + 1, mgCaffeine: Number(mg.value),
                               date: new Date(date.value).toISOString() };
              if (drink.type) edited.type = drink.type;
              if (drink.source) edited.source = drink.source;
              save.disabled = true;
              try {
                await api("POST", "/api/v1/drinks", edited);
                say("Saved.", false);
                item.replaceWith(row(Object.assign({}, drink, edited)));
                refreshList();
              } catch (e) {
                say("Not saved: " + e.message, true);
                save.disabled = false;
              }
            });
            item.replaceChildren(form);
            date.focus();
          }

          let refreshing = null;
          async function refreshList() {
            if (document.querySelector("#recent form")) return;  // never under the person's hands
            if (refreshing) return;
            refreshing = api("GET", "/api/v1/drinks")
              .then((reply) => {
                const rows = reply.drinks.slice().reverse().map(row);
                $("recent").replaceChildren(...rows);
                $("recent-empty").hidden = rows.length > 0;
              })
              .catch((e) => { $("recent-empty").textContent = "The drinks cannot be listed: " + e.message; })
              .finally(() => { refreshing = null; });
          }

          document.querySelectorAll("#drink-buttons .drink").forEach((button) =>
            button.addEventListener("click", () => logDrink(button)));
          $("undo").addEventListener("click", undo);

          function offline() {
            $("status").textContent = OFFLINE;
            $("status").className = "status offline";
          }
          window.addEventListener("offline", offline);
          window.addEventListener("online", () => {
            $("status").textContent = "reconnecting…";
            $("status").className = "status";
            sendWaiting();
          });
          if ("serviceWorker" in navigator) {
            navigator.serviceWorker.register("/sw.js").catch((e) => console.warn("no service worker", e));
            navigator.serviceWorker.addEventListener("message", (e) => {
              if (e.data && e.data.kind === "taps-sent") {
                told(e.data.outcome);
                showWaiting();
              }
            });
          }
          // No picture while offline: its place stays, empty.
          $("curve").addEventListener("error", () => $("curve").classList.add("missing"));
          $("curve").addEventListener("load", () => $("curve").classList.remove("missing"));
          if ($("curve").complete && $("curve").naturalWidth === 0) $("curve").classList.add("missing");
          if (!navigator.onLine) offline();
          sendWaiting();

          const events = new EventSource("/events");
          events.addEventListener("open", () => sendWaiting());
          events.addEventListener("model", (e) => {
            draw(JSON.parse(e.data));
            $("status").textContent = changedHistory ? "live · the store changed (restored or promoted): drawn again" : "live";
            $("status").className = "status live";
          });
          events.addEventListener("error", () => {
            if (!navigator.onLine) return offline();
            $("status").textContent = "reconnecting…";
            $("status").className = "status";
          });
        })();

        """
}
