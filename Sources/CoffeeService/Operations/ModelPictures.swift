import CoffeeCharts
import CoffeeDomain
import CoffeeModel
import Foundation
import HealthStore

/// What the HTTP endpoint shows of the model (docs/protocol.md §10): the live
/// page and its assets, the picture (`/model.svg`, drawn from the drinks of
/// the last 36 hours, which the model holds), and the first events of `/events` (the
/// current model, so that a page draws at once; later ones come from
/// `ModelService`'s publishing).
struct ModelPictures: Sendable {
    let store: HealthStore
    let model: ModelService
    let clock: any WallClock
    /// The person's settings (§15): the curve's half-life and sleep
    /// threshold, the history page's zone and limit, the page's buttons.
    var settings: LiveSettings { store.liveSettings }

    static let pageHeaders = ["Content-Security-Policy": LivePage.contentSecurityPolicy, "Cache-Control": "no-store"]

    /// What the pages' files are, as `Content-Type` says it.
    enum Kind: String {
        case html = "text/html; charset=utf-8"
        case script = "text/javascript; charset=utf-8"
        case style = "text/css; charset=utf-8"
        case manifest = "application/manifest+json"
        case svg = "image/svg+xml"
    }

    /// One of the pages' files, under their headers.
    static func asset(_ kind: Kind, _ body: String) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: kind.rawValue, body: body, headers: pageHeaders)
    }

    /// The answer for `path`, or nil when it is not one of the pictures'.
    func answer(_ path: String) async -> HTTPResponse? {
        switch path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path {
        case "/", "/index.html": return Self.asset(.html, LivePage.html(settings.catalogue))
        case "/api.js": return Self.asset(.script, LivePage.apiScript)
        case "/app.js": return Self.asset(.script, LivePage.script)
        case "/app.css": return Self.asset(.style, LivePage.style)
        case "/manifest.webmanifest": return Self.asset(.manifest, LivePage.manifest)
        case "/sw.js": return Self.asset(.script, LivePage.serviceWorker)
        case "/push.js": return Self.asset(.script, LivePage.pushScript)
        case "/queue.js": return Self.asset(.script, LivePage.queueScript)
        case let icon where LivePage.icons[icon] != nil:
            return HTTPResponse(status: 200, contentType: "image/png", bytes: LivePage.icons[icon]!, headers: Self.pageHeaders)
        case "/favicon.svg", "/favicon.ico": return Self.asset(.svg, LivePage.icon)
        case "/model.svg":
            return await svg()
        case "/history", "/history.html": return Self.asset(.html, HistoryPage.html)
        case "/settings", "/settings.html": return Self.asset(.html, SettingsPage.html)
        case "/settings.js": return Self.asset(.script, SettingsPage.script)
        case "/history.svg":
            return await historySVG()
        case "/events":
            return await events()
        default:
            return nil
        }
    }

    /// The picture now, from the model's drinks (every commit made before
    /// the request applied), or from the store while the model does not
    /// cover the 36 hours yet (before it has loaded).
    func svg() async -> HTTPResponse {
        let now = clock.now()
        let window = CaffeineChart.window(at: now)
        do {
            let drinks: [Drink]
            if let held = await model.drinks(datedIn: window) {
                drinks = held
            } else {
                drinks = try await store.drinks(datedIn: window)
            }
            let person = settings.person
            let chart = CaffeineChart(model: person.model, sleepThresholdMg: person.sleepThresholdMg)
            return HTTPResponse(
                status: 200, contentType: "image/svg+xml", body: chart.svg(drinks, now: now), headers: Self.pageHeaders)
        } catch {
            return HTTPResponse(status: 503, body: "the store cannot be read: \(error)\n")
        }
    }

    /// The history page's picture: the days of the last `HistoryChart.heatWeeks` weeks up to today.
    func historySVG() async -> HTTPResponse {
        let now = clock.now()
        let history = PersonHistory(store: store, settings: settings.person)
        let chart = HistoryChart(dailyLimitMg: history.settings.dailyLimitMg, calendar: history.calendar)
        do {
            let from = now - Double(HistoryChart.heatWeeks * 7) * 86_400
            let days = try await history.buckets(.day, from: from, to: now) ?? []
            return HTTPResponse(status: 200, contentType: "image/svg+xml", body: chart.svg(days), headers: Self.pageHeaders)
        } catch {
            return HTTPResponse(status: 503, body: "the store cannot be read: \(error)\n")
        }
    }

    /// An event stream that starts with the current model.
    func events() async -> HTTPResponse {
        var body = "retry: 2000\n\n"
        if let snapshot = await model.snapshot() { body += Self.modelEvent(snapshot) }
        return HTTPResponse(status: 200, contentType: "text/event-stream", body: body, streams: true)
    }

    /// The model as a server-sent event: the body of its `model` message.
    static func modelEvent(_ snapshot: ModelSnapshot) -> String {
        HTTPResponse.event("model", data: String(decoding: WireFormat.modelMessage(snapshot), as: UTF8.self))
    }
}
