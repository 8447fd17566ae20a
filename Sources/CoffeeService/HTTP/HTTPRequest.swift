import Foundation

/// A request as the HTTP endpoint's routes see it: read whole (head and
/// body) before any route runs, and the few header fields they use.
public struct HTTPRequest: Sendable, Equatable {
    public var method: String
    /// The path, percent-decoded, without the query.
    public var path: String
    /// The query's parameters, percent-decoded (`+` stays `+`: a date's
    /// offset must be written `%2B`); the first of a name given twice.
    public var query: [String: String]
    /// The header fields the service reads, by lower-case name.
    public var headers: [String: String]
    public var body: [UInt8]
    /// The peer's address (`127.0.0.1`); behind a trusted proxy, the client's.
    public var peer: String

    /// The fields read from a request; others are never copied.
    static let readFields = [
        "authorization", "cookie", "content-type", "x-forwarded-proto", "x-forwarded-for", "origin", "host",
    ]

    public init(
        method: String, target: String, headers: [String: String] = [:], body: [UInt8] = [], peer: String = "127.0.0.1"
    ) {
        self.method = method
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let rawPath = parts.first.map(String.init) ?? "/"
        path = rawPath.removingPercentEncoding ?? rawPath
        var query: [String: String] = [:]
        if parts.count > 1 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = String(kv[0]).removingPercentEncoding ?? String(kv[0])
                let value = kv.count > 1 ? (String(kv[1]).removingPercentEncoding ?? String(kv[1])) : ""
                if query[name] == nil { query[name] = value }
            }
        }
        self.query = query
        self.headers = headers
        self.body = body
        self.peer = peer
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}
