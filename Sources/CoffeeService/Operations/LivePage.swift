/// `GET /` on the HTTP endpoint (docs/protocol.md §10): one page that shows the
/// caffeine curve (`/model.svg`) and keeps it current from `GET /events`,
/// without a reload. Everything it loads comes from the service (its script
/// and its style are `/app.js` and `/app.css`), so it runs under
/// `Content-Security-Policy: default-src 'self'`, which forbids inline
/// scripts and styles.
enum LivePage {
    static let contentSecurityPolicy = "default-src 'self'"

    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Coffee Tracker</title>
        <link rel="icon" href="/favicon.svg" type="image/svg+xml">
        <link rel="stylesheet" href="/app.css">
        <script src="/app.js" defer></script>
        </head>
        <body>
        <main>
          <header>
            <h1>Coffee Tracker</h1>
            <p id="status" class="status">connecting…</p>
          </header>
          <section class="figures" aria-live="polite">
            <div class="figure"><span id="mg" class="value">–</span><span class="label">mg caffeine now</span></div>
            <div class="figure"><span id="level" class="value level">–</span><span class="label">level</span></div>
            <div class="figure"><span id="cups" class="value">–</span><span class="label">cups today</span></div>
            <div class="figure"><span id="drinks" class="value">–</span><span class="label">drinks today</span></div>
          </section>
          <figure>
            <img id="curve" src="/model.svg" alt="Caffeine from 12 hours ago to 24 hours ahead" width="960" height="440">
          </figure>
          <footer>anchor <span id="anchor">–</span> · updated <span id="at">–</span></footer>
        </main>
        </body>
        </html>

        """

    /// A cup, in the level's green.
    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><path d="M5 10h18v9a8 8 0 0 1-8 8h-2a8 8 0 0 1-8-8z" fill="#2e7d32"/><path d="M23 13h2a4 4 0 0 1 0 8h-2" fill="none" stroke="#2e7d32" stroke-width="2.5"/><path d="M11 3c-2 2 2 3 0 5M16 3c-2 2 2 3 0 5" fill="none" stroke="#78909c" stroke-width="1.5"/></svg>

        """

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
          }
          const events = new EventSource("/events");
          events.addEventListener("model", (e) => {
            draw(JSON.parse(e.data));
            $("status").textContent = changedHistory ? "live · the store changed (restored or promoted): drawn again" : "live";
            $("status").className = "status live";
          });
          events.addEventListener("error", () => {
            $("status").textContent = "reconnecting…";
            $("status").className = "status";
          });
        })();

        """

    static let style = """
        :root { color-scheme: light; --ink: #263238; --muted: #78909c; }
        * { box-sizing: border-box; }
        body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: #f5f7f8; }
        main { max-width: 1000px; margin: 0 auto; padding: 16px; }
        header { display: flex; align-items: baseline; justify-content: space-between; gap: 12px; flex-wrap: wrap; }
        h1 { font-size: 1.5rem; margin: 0.5rem 0; }
        .status { color: var(--muted); margin: 0; }
        .status.live::before { content: "● "; color: #2e7d32; }
        .figures { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin: 12px 0; }
        .figure { background: #fff; border-radius: 12px; padding: 12px 16px; box-shadow: 0 1px 3px rgba(0,0,0,0.08); }
        .value { display: block; font-size: 2rem; font-weight: 600; }
        .label { color: var(--muted); font-size: 0.85rem; }
        .level.green { color: #2e7d32; } .level.yellow { color: #f9a825; } .level.red { color: #c62828; }
        figure { margin: 0; background: #fff; border-radius: 12px; padding: 8px; box-shadow: 0 1px 3px rgba(0,0,0,0.08); }
        figure img { width: 100%; height: auto; display: block; }
        footer { color: var(--muted); font-size: 0.85rem; margin-top: 8px; }
        @media (max-width: 600px) {
          .figures { grid-template-columns: repeat(2, 1fr); }
          .value { font-size: 1.5rem; }
        }

        """
}
