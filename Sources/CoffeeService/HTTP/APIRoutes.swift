import CoffeeDomain
import Foundation

/// The JSON API under `/api/v1` (docs/protocol.md §12): each route made into
/// its query operation's request (`QueryOperation.routes`) and answered by
/// the query endpoint's own handler, so that both doors keep the same rules,
/// replies and durability; plus Health Auto Export's automation.
struct APIRoutes: Sendable {
    let handler: QueryHandler

    /// What a request under `/api/v1` is.
    enum Resolution: Equatable {
        case operation(QueryOperation, segment: String?)
        case healthAutoExport
        /// `GET /api/v1/export.csv` (§15).
        case exportCSV
        case methodNotAllowed(allow: String)
        case notFound

        /// The token role it needs (a route that is not one needs `read`, so that its 404 tells nothing to strangers).
        var role: TokenRole {
            switch self {
            case .operation(let op, _): op.administers ? .admin : op.writes ? .write : .read
            case .healthAutoExport: .write
            case .exportCSV, .methodNotAllowed, .notFound: .read
            }
        }
    }

    static let healthAutoExportRoute = APIRoute("POST", "health-auto-export")
    static let exportRoute = APIRoute("GET", "export.csv")

    static func isAPI(_ path: String) -> Bool { path.hasPrefix(APIRoute.prefix) || path == "/api/v1" }

    static func resolve(method: String, path: String) -> Resolution {
        guard path.hasPrefix(APIRoute.prefix) else { return .notFound }
        let rest = path.dropFirst(APIRoute.prefix.count)
        var allowed: [String] = []
        let routes: [(Resolution?, APIRoute)] =
            QueryOperation.allCases.flatMap { op in op.routes.map { (nil, $0) } }
            + [(.healthAutoExport, healthAutoExportRoute), (.exportCSV, exportRoute)]
        let operations = QueryOperation.allCases.flatMap { op in op.routes.map { _ in op } }
        for (index, (special, route)) in routes.enumerated() {
            guard let segment = route.match(rest) else { continue }
            guard route.method == method || (method == "HEAD" && route.method == "GET") else {
                allowed.append(route.method)
                continue
            }
            if let special { return special }
            return .operation(operations[index], segment: segment.map(String.init))
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allow: allowed.joined(separator: ", "))
    }

    func answer(_ request: HTTPRequest, caller: QueryHandler.Caller) async -> HTTPResponse {
        switch Self.resolve(method: request.method, path: request.path) {
        case .notFound:
            return HTTPGate.error(404, "not_found", "no route \(request.path) in the JSON API (docs/protocol.md §12)")
        case .methodNotAllowed(let allow):
            return HTTPGate.error(
                405, "method_not_allowed", "\(request.path) answers \(allow)", headers: ["Allow": allow])
        case .healthAutoExport:
            return Self.response(await handler.importHealthAutoExport(request.body, caller: caller))
        case .exportCSV:
            // A store that fails after the first page cuts the body short (no last chunk), which the client sees.
            do {
                return HTTPResponse(
                    status: 200, contentType: "text/csv; charset=utf-8; header=present", stream: try await handler.exportCSV(),
                    headers: ["Content-Disposition": "attachment; filename=\"coffee-tracker.csv\"", "Cache-Control": "no-store"])
            } catch {
                return Self.response(await handler.outcome { throw error })
            }
        case .operation(.add, _):
            return Self.response(await handler.add(body: request.body, caller: caller))
        case .operation(let op, let segment):
            do {
                let query = try Self.request(op, segment: segment, request)
                return Self.response(await handler.answer(query, caller: caller))
            } catch {
                return Self.response(QueryHandler.Outcome(json: error.json, error: error.code))
            }
        }
    }

    /// The query request a route stands for.
    static func request(_ op: QueryOperation, segment: String?, _ request: HTTPRequest) throws(QueryError) -> JSONValue {
        var members: [(String, JSONValue)] = [("op", .string(op.rawValue))]
        switch op {
        case .ping, .stats, .backup, .settings, .catalogue, .pushKey, .pushSubscriptions: break
        case .pushSubscribe: members.append(("subscription", try body(request)))
        case .pushUnsubscribe: members.append(("id", .string(segment ?? "")))
        case .putSettings: members.append(("settings", try body(request)))
        case .putCatalogue:
            members.append(("name", .string(segment ?? "")))
            members.append(("entry", try body(request)))
        case .model:
            if let at = request.query["at"] { members.append(("at", .string(at))) }
        case .drinks, .history:
            for name in ["from", "to", "by", "after"] {
                if let value = request.query[name] { members.append((name, .string(value))) }
            }
            if op == .drinks, let limit = request.query["limit"] { members.append(("limit", integer(limit))) }
        case .changes:
            members.append(("anchor", integer(request.query["anchor"])))
            if let limit = request.query["limit"] { members.append(("limit", integer(limit))) }
        case .add:
            preconditionFailure("POST /api/v1/drinks is read in place by QueryHandler.add(body:caller:), never made a request")
        case .delete:
            if let uuid = segment {
                var deletion: [(String, JSONValue)] = [("uuid", .string(uuid))]
                if let version = request.query["version"] { deletion.append(("version", integer(version))) }
                members.append(("deletions", .array([.object(deletion)])))
            } else {
                guard case .array(let items) = try body(request) else {
                    throw QueryError(.badRequest, "the body must be an array of deletions ({\"uuid\", \"version\"?} or a UUID)")
                }
                members.append(("deletions", .array(items)))
            }
        }
        return .object(members)
    }

    /// A query parameter as JSON: nothing (`null`), an integer, or its text (which the handler refuses, naming it).
    private static func integer(_ text: String?) -> JSONValue {
        guard let text, !text.isEmpty else { return .null }
        return Int64(text).map { .int($0) } ?? .string(text)
    }

    private static func body(_ request: HTTPRequest) throws(QueryError) -> JSONValue {
        do throws(JSONReader.SyntaxError) {
            return try JSONReader.parse(Data(request.body))
        } catch {
            throw QueryError(.badRequest, "the body is not valid JSON (\(error))")
        }
    }

    /// §12's status for a reply.
    static func response(_ outcome: QueryHandler.Outcome) -> HTTPResponse {
        var headers: [String: String] = [:]
        let status: Int
        switch outcome.error {
        case nil: status = 200
        case .badRequest?, .invalidDrink?: status = 400
        case .forbidden?: status = 403
        case .readOnly?: status = 409
        case .anchorExpired?: status = 410
        case .tooLarge?: status = 413
        case .unavailable?:
            status = 503
            headers["Retry-After"] = "1"
        case .internal?: status = 500
        }
        return HTTPResponse(
            status: status, contentType: "application/json", body: outcome.json.serialized() + "\n", headers: headers)
    }
}
