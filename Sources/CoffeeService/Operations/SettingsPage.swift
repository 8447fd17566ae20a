import CoffeeDomain
import Foundation

/// `GET /settings` on the HTTP endpoint (docs/protocol.md §17): the person's
/// settings (§15: half-life, sleep threshold, daily limit, level limit, zone,
/// bedtime) and their drinks' catalogue, changed through the JSON API's
/// same-origin writes (`PUT /api/v1/settings` and `/api/v1/catalogue/NAME`,
/// the `admin` role); a refusal shows its field's message beside the field.
/// Under the live page's `Content-Security-Policy`: the form's script is
/// `/settings.js`.
enum SettingsPage {
    /// The page, with every IANA zone name the service takes as the zone's choices.
    static let html: String = {
        let zones = (["UTC"] + TimeZone.knownTimeZoneIdentifiers.sorted().filter { $0 != "UTC" && $0 != "GMT" })
            .map { "<option>\($0)</option>" }.joined()
        return LivePage.head(
            title: "Coffee Tracker · settings",
            extra: "<script src=\"/api.js\" defer></script>\n<script src=\"/settings.js\" defer></script>\n")
                + """

                <body>
                <main>
                  <header>
                    <h1>Settings</h1>
                    <nav class="status"><a href="/">Live</a> · <a href="/history">History</a></nav>
                  </header>
                  <form id="settings" class="settings" novalidate>
                    <label>Half-life (hours)<input name="halfLifeHours" type="number" min="0.5" max="24" step="any" required></label>
                    <label>Sleep threshold (mg)<input name="sleepThresholdMg" type="number" min="0" step="any" required></label>
                    <label>Daily limit (mg)<input name="dailyLimitMg" type="number" min="1" step="any" required></label>
                    <label>Tell me over (mg, 0: never)<input name="levelOverMg" type="number" min="0" step="any" required></label>
                    <label>Time zone<select name="timeZone">\(zones)</select></label>
                    <label>Bedtime (empty: no warning)<input name="bedtime" type="time"></label>
                    <p class="actions"><button type="submit">Save</button>
                    <span id="settings-message" class="message" role="status" aria-live="polite"></span></p>
                  </form>
                  <section aria-labelledby="catalogue-title">
                    <h2 id="catalogue-title">Drinks</h2>
                    <ol id="catalogue" class="recent-list"></ol>
                    <form id="new-drink" class="settings">
                      <label>Name<input name="name" required pattern="[A-Za-z][A-Za-z0-9_-]*" maxlength="64"></label>
                      <label>mg<input name="mgCaffeine" type="number" min="0.1" step="any" required></label>
                      <p class="actions"><button type="submit">Add</button>
                      <span id="catalogue-message" class="message" role="status" aria-live="polite"></span></p>
                    </form>
                  </section>
                </main>
                </body>
                </html>

                """
    }()

    /// `/settings.js`: reads the settings and the catalogue, writes what changed.
    static let script = """
        "use strict";
        (function () {
          const $ = (id) => document.getElementById(id);
          const form = $("settings");
          const call = CoffeeAPI;  // /api.js
          function say(id, text, isError) {
            $(id).textContent = text;
            $(id).className = isError ? "message error" : "message";
          }
          // A refusal names its field (settings.timeZone): the field is marked and says why.
          function mark(error) {
            form.querySelectorAll("[aria-invalid]").forEach((f) => f.removeAttribute("aria-invalid"));
            const name = (error.field || "").replace(/^settings\\./, "");
            const field = name && form.elements[name];
            if (field) {
              field.setAttribute("aria-invalid", "true");
              field.focus();
            }
          }
          let shown = {};
          function fill(values) {
            shown = values;
            for (const name of ["halfLifeHours", "sleepThresholdMg", "dailyLimitMg", "levelOverMg", "timeZone"]) {
              form.elements[name].value = values[name];
            }
            form.elements.bedtime.value = values.bedtime === "off" ? "" : values.bedtime;
          }
          form.addEventListener("submit", async (event) => {
            event.preventDefault();
            const changed = {};
            for (const name of ["halfLifeHours", "sleepThresholdMg", "dailyLimitMg", "levelOverMg"]) {
              const value = Number(form.elements[name].value);
              if (value !== shown[name]) changed[name] = value;
            }
            if (form.elements.timeZone.value !== shown.timeZone) changed.timeZone = form.elements.timeZone.value;
            const bedtime = form.elements.bedtime.value || "off";
            if (bedtime !== shown.bedtime) changed.bedtime = bedtime;
            if (Object.keys(changed).length === 0) return say("settings-message", "Nothing changed.", false);
            try {
              fill((await call("PUT", "/api/v1/settings", changed)).settings);
              mark({});
              say("settings-message", "Saved.", false);
            } catch (e) {
              mark(e);
              say("settings-message", "Not saved: " + e.message, true);
            }
          });

          function entry(drink) {
            const item = document.createElement("li");
            item.dataset.name = drink.name;
            const what = document.createElement("span");
            what.className = "what";
            what.textContent = drink.name + " · " + drink.mgCaffeine + " mg" + (drink.retired ? " (retired)" : "");
            const mg = document.createElement("input");
            mg.type = "number";
            mg.min = "0.1";
            mg.step = "any";
            mg.value = drink.mgCaffeine;
            mg.setAttribute("aria-label", drink.name + " mg");
            const save = document.createElement("button");
            save.type = "button";
            save.textContent = "Save mg";
            save.addEventListener("click", () => put(drink.name, { mgCaffeine: Number(mg.value) }));
            const retire = document.createElement("button");
            retire.type = "button";
            retire.className = "retire";
            retire.textContent = drink.retired ? "Restore" : "Retire";
            retire.addEventListener("click", () => put(drink.name, { retired: !drink.retired }));
            const rename = document.createElement("input");
            rename.placeholder = "new name";
            rename.setAttribute("aria-label", "rename " + drink.name);
            const renamed = document.createElement("button");
            renamed.type = "button";
            renamed.textContent = "Rename";
            renamed.addEventListener("click", () => rename.value && put(rename.value, { renamedFrom: drink.name }));
            item.append(what, mg, save, retire, rename, renamed);
            return item;
          }
          async function put(name, body) {
            try {
              show((await call("PUT", "/api/v1/catalogue/" + encodeURIComponent(name), body)).drinks);
              say("catalogue-message", "Saved " + name + ".", false);
            } catch (e) {
              say("catalogue-message", "Not saved: " + e.message, true);
            }
          }
          function show(drinks) { $("catalogue").replaceChildren(...drinks.map(entry)); }
          $("new-drink").addEventListener("submit", (event) => {
            event.preventDefault();
            const f = event.target.elements;
            put(f.name.value, { mgCaffeine: Number(f.mgCaffeine.value) });
          });

          call("GET", "/api/v1/settings").then((reply) => fill(reply.settings))
            .catch((e) => say("settings-message", "The settings cannot be read: " + e.message, true));
          call("GET", "/api/v1/catalogue").then((reply) => show(reply.drinks))
            .catch((e) => say("catalogue-message", "The catalogue cannot be read: " + e.message, true));
        })();

        """
}
