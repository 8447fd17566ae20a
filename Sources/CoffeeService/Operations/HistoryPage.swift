/// `GET /history` on the HTTP endpoint (docs/protocol.md §15): the person's
/// last days as bars against their daily limit and the last weeks as a heat
/// map, one picture drawn by the service (`/history.svg`), with a link to
/// every drink as CSV. Under the live page's `Content-Security-Policy`.
enum HistoryPage {
    static let html =
        LivePage.head(title: "Coffee Tracker · history") + """

            <body>
            <main>
              <header>
                <h1>History</h1>
                <nav class="status"><a href="/">Live</a> · <a href="/api/v1/export.csv">Every drink as CSV</a></nav>
              </header>
              <figure>
                <img id="history" src="/history.svg" alt="Caffeine by day for the last 30 days against the daily limit, and a heat map of the last 26 weeks" width="960" height="606">
              </figure>
              <footer>Days and weeks of your time zone; the same figures are <code>GET /api/v1/history</code>.</footer>
            </main>
            </body>
            </html>

            """
}
