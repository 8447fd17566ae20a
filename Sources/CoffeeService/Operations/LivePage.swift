import CoffeeDomain

/// `GET /` on the HTTP endpoint (docs/protocol.md §10, §15): one page that
/// shows the caffeine curve (`/model.svg`) and keeps it current from `GET
/// /events`, without a reload, and where the person logs a drink with a
/// tap, takes the last one back, and corrects the drinks of the last 24
/// hours. Everything it loads comes from the service (its script and its
/// style are `/app.js` and `/app.css`), so it runs under
/// `Content-Security-Policy: default-src 'self'`, which forbids inline
/// scripts and styles.
enum LivePage {
    static let contentSecurityPolicy = "default-src 'self'"

    /// A drink type as people read it: `doubleEspresso` is "Double espresso".
    static func label(_ type: DrinkType) -> String {
        var words = ""
        for character in type.rawValue {
            if character.isUppercase { words += " " + character.lowercased() } else { words.append(character) }
        }
        return words.prefix(1).uppercased() + words.dropFirst()
    }

    /// One button a drink the catalogue offers (§15), with its serving.
    static func drinkButtons(_ catalogue: DrinkCatalogue) -> String {
        catalogue.offered.map { entry in
            let mg = JSONValue.double(entry.mgCaffeine).serialized()
            return """
                    <button type="button" class="drink" data-type="\(entry.type.rawValue)" data-mg="\(mg)">\
                <span class="name">\(label(entry.type))</span><span class="mg">\(mg) mg</span></button>
                """
        }.joined(separator: "\n")
    }

    /// The head every page of the service shares: its title, the icon, the
    /// style, and `extra` (a script).
    static func head(title: String, extra: String = "") -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(title)</title>
        <link rel="icon" href="/favicon.svg" type="image/svg+xml">
        <link rel="manifest" href="/manifest.webmanifest" crossorigin="use-credentials">
        <meta name="theme-color" content="#2e7d32">
        <link rel="stylesheet" href="/app.css">
        \(extra)</head>
        """
    }

    /// The page, with the buttons of `catalogue`.
    static func html(_ catalogue: DrinkCatalogue) -> String {
        htmlTemplate.replacingOccurrences(of: buttonsMark, with: drinkButtons(catalogue))
    }

    private static let buttonsMark = "<!-- drink buttons -->"

    /// The tap queue first: the page's script uses it (§17).
    private static let scripts = """
        <script src="/api.js" defer></script>
        <script src="/queue.js" defer></script>
        <script src="/app.js" defer></script>
        <script src="/push.js" defer></script>

        """

    private static let htmlTemplate =
        head(title: "Coffee Tracker", extra: scripts) + """

            <body>
            <main>
              <header>
                <h1>Coffee Tracker</h1>
                <p class="status"><a href="/history">History</a> · <a href="/settings">Settings</a> · <span id="status">connecting…</span></p>
                <p class="notify"><button type="button" id="notify" hidden>Tell me on this phone</button>
                <span id="notify-state" class="muted" role="status" aria-live="polite"></span></p>
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
              <section class="log" aria-labelledby="log-title">
                <h2 id="log-title">Log a drink</h2>
                <div id="drink-buttons" class="drinks">
            \(buttonsMark)
                </div>
                <p class="actions"><button type="button" id="undo" disabled>Undo</button>
                <span id="message" class="message" role="status" aria-live="polite"></span>
            <span id="waiting" class="waiting" role="status" aria-live="polite" hidden></span></p>
              </section>
              <section class="recent" aria-labelledby="recent-title">
                <h2 id="recent-title">Last 24 hours</h2>
                <ol id="recent" class="recent-list"></ol>
                <p id="recent-empty" class="muted">No drinks in the last 24 hours.</p>
              </section>
              <footer>anchor <span id="anchor">–</span> · updated <span id="at">–</span></footer>
            </main>
            </body>
            </html>

            """

    /// A cup, in the level's green.
    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><path d="M5 10h18v9a8 8 0 0 1-8 8h-2a8 8 0 0 1-8-8z" fill="#2e7d32"/><path d="M23 13h2a4 4 0 0 1 0 8h-2" fill="none" stroke="#2e7d32" stroke-width="2.5"/><path d="M11 3c-2 2 2 3 0 5M16 3c-2 2 2 3 0 5" fill="none" stroke="#78909c" stroke-width="1.5"/></svg>

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
        figure img.missing { visibility: hidden; }
        footer { color: var(--muted); font-size: 0.85rem; margin-top: 8px; }
        h2 { font-size: 1.1rem; margin: 20px 0 8px; }
        .drinks { display: grid; grid-template-columns: repeat(auto-fill, minmax(140px, 1fr)); gap: 8px; }
        button { font: inherit; color: inherit; border: 1px solid #cfd8dc; background: #fff; border-radius: 10px; padding: 10px 12px; cursor: pointer; min-height: 44px; }
        button:hover:not(:disabled) { border-color: #2e7d32; }
        button:focus-visible, input:focus-visible { outline: 3px solid #1565c0; outline-offset: 2px; }
        button:disabled { color: var(--muted); cursor: default; }
        .drink { display: flex; flex-direction: column; align-items: flex-start; text-align: left; }
        .drink .mg, .muted { color: var(--muted); font-size: 0.85rem; }
        .actions { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; }
        .message.error { color: #c62828; }
        .waiting { color: #8d6e00; font-weight: 600; }
        .settings { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 12px; margin: 12px 0; }
        .settings label { display: flex; flex-direction: column; gap: 4px; color: var(--muted); font-size: 0.9rem; }
        .settings input, .settings select { font: inherit; color: var(--ink); padding: 8px; border: 1px solid #cfd8dc; border-radius: 8px; max-width: 100%; }
        .settings [aria-invalid="true"] { border-color: #c62828; outline: 2px solid #c62828; }
        .recent-list li input { font: inherit; padding: 6px; border: 1px solid #cfd8dc; border-radius: 8px; width: 7em; }
        .status.offline::before { content: "○ "; color: #8d6e00; }
        .recent-list { list-style: none; padding: 0; margin: 0; }
        .recent-list li { background: #fff; border-radius: 10px; padding: 8px 12px; margin-bottom: 6px; display: flex; flex-wrap: wrap; align-items: center; gap: 8px 12px; box-shadow: 0 1px 3px rgba(0,0,0,0.06); }
        .recent-list .when { font-variant-numeric: tabular-nums; min-width: 4.5em; }
        .recent-list .what { flex: 1 1 8em; }
        .recent-list form { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; width: 100%; }
        .recent-list input { font: inherit; padding: 8px; border: 1px solid #cfd8dc; border-radius: 8px; max-width: 100%; }
        .recent-list input[type=number] { width: 6em; }
        @media (max-width: 600px) {
          .figures { grid-template-columns: repeat(2, 1fr); }
          .value { font-size: 1.5rem; }
          .drinks { grid-template-columns: repeat(2, 1fr); }
        }

        """
}
