import CoffeeAlerts
import HealthStore

/// What the HTTP endpoint answers (docs/protocol.md §9 and §10): `/healthz`
/// (the store's thread answers), `/readyz` (started, not draining, the
/// store writes), `/metrics`, and the model's page, picture and events
/// (`ModelPictures`); 404 for anything else.
struct OperationsRoutes: Sendable {
    let store: HealthStore
    let phase: ServicePhase
    let metrics: ServiceMetrics
    let pictures: ModelPictures
    /// Alerts and the broker (§16): what fails there is shown, never a reason to be unready.
    let outbound: Outbound?

    func answer(_ request: HTTPRequest) async -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return HTTPGate.error(
                405, "method_not_allowed", "\(request.path) answers GET and HEAD", headers: ["Allow": "GET, HEAD"])
        }
        if let answer = await pictures.answer(request.path) { return answer }
        switch request.path {
        case "/healthz":
            return await store.answers(within: .seconds(1))
                ? HTTPResponse(status: 200, body: "ok\n")
                : HTTPResponse(status: 503, body: "the store's thread does not answer\n")
        case "/readyz":
            switch phase.current {
            case .ready:
                if store.isFaulted {
                    return HTTPResponse(status: 503, body: "the store cannot write: \(store.faultDescription ?? "")\n")
                }
                let problems = await outbound?.report(store).problems ?? []
                return HTTPResponse(status: 200, body: (["ready"] + problems).joined(separator: "\n") + "\n")
            case .draining: return HTTPResponse(status: 503, body: "draining\n")
            case .starting: return HTTPResponse(status: 503, body: "starting\n")
            }
        case "/metrics":
            return HTTPResponse(status: 200, contentType: MetricsExposition.contentType, body: await metrics.text())
        default:
            return HTTPGate.error(
                404, "not_found", "no route \(request.path); try /, /model.svg, /events, /metrics, /healthz or /readyz")
        }
    }
}
