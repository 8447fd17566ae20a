import CoffeeDomain
import Foundation

/// The calls of docs/protocol.md §4, with typed replies decoded from the wire.
extension QueryClient {
    /// A request the service refused: `code` (`invalid_drink`,
    /// `anchor_expired`, `unavailable`…), its message, and for a drink the
    /// element's `index` and `field`.
    public struct Refusal: Error, CustomStringConvertible, Equatable {
        public var code: String
        public var message: String
        public var index: Int?
        public var field: String?
        public var description: String { "\(code): \(message)" }
    }

    /// Sends `request`; the reply when it is `{"ok": true, ...}`.
    ///
    /// - Throws: `Refusal` for an error reply; `Failure` for silence or a
    ///   reply that is not JSON.
    public func reply(_ request: JSONValue) throws -> JSONValue {
        try checked(exchange(request))
    }

    /// A reply's bytes as a reply: itself when `{"ok": true, ...}`.
    func checked(_ raw: Data) throws -> JSONValue {
        let reply: JSONValue
        do {
            reply = try JSONReader.parse(raw)
        } catch {
            throw Failure(description: "the service at \(endpoint) sent a reply that is not JSON: \(error)")
        }
        if (try? reply.member("ok").bool()) == true { return reply }
        let error = try? reply.member("error")
        throw Refusal(
            code: (try? error?.member("code").text()) ?? "internal",
            message: (try? error?.member("message").text()) ?? "no message",
            index: (try? error?.optionalMember("index")?.integer()).flatMap { $0.map(Int.init) },
            field: (try? error?.optionalMember("field")?.text()) ?? nil)
    }

    /// The store's anchor.
    public func ping() throws -> Ping {
        try decoded { try Ping(reply(.object([("op", .string(QueryOperation.ping.rawValue))]))) }
    }

    /// Stores `drinks`; returns once the commit is durable.
    public func add(_ drinks: [Drink]) throws -> AddResult {
        try decoded {
            try AddResult(
                reply(
                    .object([
                        ("op", .string(QueryOperation.add.rawValue)), ("drinks", .array(drinks.map { WireFormat.json($0) })),
                    ])))
        }
    }

    public func delete(_ deletions: [Deletion]) throws -> DeleteResult {
        let items = deletions.map { d -> JSONValue in
            .object([("uuid", .string(UUIDText.string(d.uuid)))] + (d.version.map { [("version", JSONValue.int($0))] } ?? []))
        }
        return try decoded {
            try DeleteResult(reply(.object([("op", .string(QueryOperation.delete.rawValue)), ("deletions", .array(items))])))
        }
    }

    /// One page of changes after `anchor` (nil: every live drink).
    public func changes(since anchor: Int64?, limit: Int = 1000) throws -> Changes {
        let raw = try exchange(
            .object([
                ("op", .string(QueryOperation.changes.rawValue)), ("anchor", anchor.map { .int($0) } ?? .null),
                ("limit", .int(Int64(limit))),
            ]))
        // A page, as the service writes one, is read in place: a resync or a
        // standby's catch-up reads pages of thousands of drinks. Anything
        // else (a refusal) goes the tree's way.
        if raw.starts(with: Self.success), let page = try? raw.withUnsafeBytes({ try Changes(json: $0) }) { return page }
        return try decoded { try Changes(checked(raw)) }
    }

    /// The live drinks dated from `from` to `to`, both included, oldest first (docs/protocol.md §15).
    public func drinks(from: Date, to: Date) throws -> [Drink] {
        let reply = try reply(
            .object([
                ("op", .string(QueryOperation.drinks.rawValue)), ("from", .string(RFC3339.string(from))),
                ("to", .string(RFC3339.string(to))),
            ]))
        return try decoded {
            guard case .array(let items) = try reply.member("drinks") else {
                throw WireFormat.DecodingError("drinks must be an array")
            }
            return try items.map { try WireFormat.drink($0) }
        }
    }

    /// A page of the live drinks dated from `from` to `to`, oldest first
    /// (then by UUID): at most `limit`, after the drink `after` of `from`'s
    /// date; `more` when another page follows, from the last drink's date
    /// and UUID (docs/protocol.md §15).
    public func drinks(from: Date, to: Date, after: UUID?, limit: Int) throws -> (drinks: [Drink], more: Bool) {
        var request: [(String, JSONValue)] = [
            ("op", .string(QueryOperation.drinks.rawValue)), ("from", .string(RFC3339.string(from))),
            ("to", .string(RFC3339.string(to))), ("limit", .int(Int64(limit))),
        ]
        if let after { request.append(("after", .string(after.uuidString))) }
        let reply = try reply(.object(request))
        return try decoded {
            guard case .array(let items) = try reply.member("drinks"), case .bool(let more) = try reply.member("more") else {
                throw WireFormat.DecodingError("drinks must be an array and more a boolean")
            }
            return (try items.map { try WireFormat.drink($0) }, more)
        }
    }

    /// How every success the service writes begins.
    static let success = Data(#"{"ok":true,"#.utf8)

    /// The model now, or at `at`.
    public func model(at: Date? = nil) throws -> ModelSnapshot {
        var request: [(String, JSONValue)] = [("op", .string(QueryOperation.model.rawValue))]
        if let at { request.append(("at", .string(RFC3339.string(at)))) }
        return try decoded { try WireFormat.snapshot(reply(.object(request))) }
    }

    public func stats() throws -> Stats {
        try decoded { try Stats(reply(.object([("op", .string(QueryOperation.stats.rawValue))]))) }
    }

    /// A reply the service sent but this client cannot read is a failure that says so.
    func decoded<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as WireFormat.DecodingError {
            throw Failure(description: "the service at \(endpoint) sent a reply this client cannot read: \(error)")
        }
    }
}
