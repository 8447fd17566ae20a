import CoffeeDomain
import CoffeeLogging
import CoffeeModel
import Foundation
import HealthStore

/// Answers query requests (PROTOCOL.md §4): one JSON request in, one JSON
/// reply out, never silence. Independent of sockets, so it is tested directly.
public struct QueryHandler: Sendable {
    public static let defaultLimit = 1000
    public static let maxLimit = 10_000

    let store: HealthStore
    let model: CoffeeData
    /// Brings the model up to date before it is read (nil: read as it is).
    let controller: StoreFollower?
    let validator: DrinkValidator
    let clock: any WallClock
    let counters: ServiceCounters
    /// `limits.maxMessageBytes`: larger requests get `too_large`.
    let maxMessageBytes: Int
    /// The admitted clients under CURVE: each op needs its role.
    let registry: ClientRegistry?
    /// `store.backupDirectory`: where `backup` writes.
    let backupDirectory: String?
    /// A standby's follower (PROTOCOL.md §11): writes are refused, `stats` tells the lag.
    let following: FollowStatus?

    /// Who sent a request.
    public enum Caller: Sendable {
        /// Plaintext: on this machine, trusted.
        case local
        /// Through CURVE: the client's name (ZeroMQ's `User-Id`).
        case client(String)
    }
    let logger: Logger

    var caffeine: CaffeineModel { model.model }

    public init(
        store: HealthStore, model: CoffeeData, controller: StoreFollower? = nil, validator: DrinkValidator,
        counters: ServiceCounters, clock: any WallClock,
        maxMessageBytes: Int = IngestEndpoint.Configuration.defaultMaxMessageBytes, registry: ClientRegistry? = nil,
        backupDirectory: String? = nil, following: FollowStatus? = nil, logger: Logger = Logger(label: "query")
    ) {
        self.following = following
        self.backupDirectory = backupDirectory
        self.logger = logger
        self.registry = registry
        self.store = store
        self.model = model
        self.controller = controller
        self.validator = validator
        self.clock = clock
        self.counters = counters
        self.maxMessageBytes = maxMessageBytes
    }

    /// The reply to `body`.
    ///
    /// - Parameter draining: the service is shutting down: the request gets `unavailable`.
    public func handle(_ body: Data, draining: Bool = false, caller: Caller = .local) async -> Data {
        ServiceCounters.bump(counters.requests)
        do {
            return try await reply(to: body, draining: draining, caller: caller).data()
        } catch let error as QueryError {
            if [.badRequest, .invalidDrink, .tooLarge].contains(error.code) { ServiceCounters.bump(counters.queryRejected) }
            return error.json.data()
        } catch let error as StoreError where error.isAnchorExpired {
            return QueryError(.anchorExpired, error.message).json.data()
        } catch let error as StoreError where error.isUnavailable {
            return QueryError(.unavailable, error.message).json.data()
        } catch let error as StoreError where error.isClosed {
            return QueryError(.unavailable, "the service is shutting down").json.data()
        } catch {
            logger.error("request failed", metadata: ["error": "\(error)"])
            return QueryError(.internal, "\(error)").json.data()
        }
    }

    func reply(to body: Data, draining: Bool = false, caller: Caller = .local) async throws -> JSONValue {
        guard body.count <= maxMessageBytes else {
            throw QueryError(.tooLarge, "request is \(body.count) bytes; limits.maxMessageBytes is \(maxMessageBytes)")
        }
        if draining { throw QueryError(.unavailable, "the service is shutting down") }
        let value: JSONValue
        do throws(JSONReader.SyntaxError) {
            value = try JSONReader.parse(body)
        } catch {
            throw QueryError(.badRequest, "request is not valid JSON (\(error))")
        }
        guard case .object = value else { throw QueryError(.badRequest, "request must be a JSON object with an \"op\"") }
        let request = QueryRequest(json: value)
        let op: String
        switch request.op {
        case .value(let v): op = v
        case .absent: throw QueryError(.badRequest, "op is required", field: "op")
        case .wrongType: throw QueryError(.badRequest, "op must be a string", field: "op")
        }
        try authorize(op, caller)
        if let following, op == "add" || op == "delete" {
            throw QueryError(
                .readOnly, "this service is a standby of \(following.primary): send \(op) to the primary", field: "op")
        }
        switch op {
        case "ping": return .object([("ok", true), ("anchor", .int(await store.anchor))])
        case "changes": return try await changes(request)
        case "model": return try await modelReply(request)
        case "add": return try await add(request, caller: caller)
        case "delete": return try await delete(request)
        case "stats": return await stats()
        case "backup": return try await backup(request)
        default:
            throw QueryError(
                .badRequest, "unknown op \"\(op.prefix(40))\"; expected ping, changes, model, add, delete, stats or backup",
                field: "op")
        }
    }

    func changes(_ request: QueryRequest) async throws -> JSONValue {
        var anchor: Int64?
        switch request.anchor {
        case .absent: anchor = nil
        case .wrongType: throw QueryError(.badRequest, "anchor must be an integer >= 0 or null", field: "anchor")
        case .value(let v):
            guard v == v.rounded(), v >= 0, v < 9e18 else {
                throw QueryError(.badRequest, "anchor must be an integer >= 0 or null", field: "anchor")
            }
            anchor = Int64(v)
        }
        var limit = Self.defaultLimit
        switch request.limit {
        case .absent: break
        case .wrongType: throw QueryError(.badRequest, "limit must be an integer", field: "limit")
        case .value(let v):
            guard v == v.rounded(), v >= 1, v <= Double(Self.maxLimit) else {
                throw QueryError(.badRequest, "limit must be an integer from 1 to \(Self.maxLimit)", field: "limit")
            }
            limit = Int(v)
        }
        let page = try await store.changes(since: anchor, limit: limit)
        return .object([
            ("ok", true),
            ("anchor", .int(page.anchor)),
            ("hasMore", .bool(page.hasMore)),
            ("added", .array(zip(page.added, page.addedAnchors).map { WireFormat.json($0, anchor: $1) })),
            ("deleted", .array(zip(page.deleted, page.deletedAnchors).map { WireFormat.json($0, anchor: $1) })),
        ])
    }

    func modelReply(_ request: QueryRequest) async throws -> JSONValue {
        var at: Date?
        switch request.at {
        case .absent: break
        case .wrongType(let expected): throw QueryError(.badRequest, "at must be \(expected)", field: "at")
        case .value(let raw):
            do throws(ValidationError) {
                at = try DrinkValidator.date(raw, field: "at")
            } catch {
                throw QueryError(.badRequest, error.reason, field: "at")
            }
        }
        let snapshot: ModelSnapshot
        await controller?.catchUp()  // every commit made before this request
        if let held = await model.snapshot(at: at) {
            snapshot = held
        } else {
            // A time the held drinks do not cover: ask the store.
            let at = at ?? clock.now()
            let drinks = try await store.drinks(datedIn: (at - CaffeineModel.retention)...at)
            snapshot = caffeine.snapshot(of: drinks, at: at, anchor: await store.anchor)
        }
        return .object([("ok", true)] + WireFormat.members(snapshot))
    }

    /// - Parameter caller: a CURVE client's drinks default to the source
    ///   "query:<client name>" (PROTOCOL.md §6).
    func add(_ request: QueryRequest, caller: Caller = .local) async throws -> JSONValue {
        let source: String
        switch caller {
        case .local: source = "query"
        case .client(let name): source = "query:" + name
        }
        guard case .value(let items) = request.drinks else {
            throw QueryError(.badRequest, "drinks must be an array of drink objects", field: "drinks")
        }
        counters.received(items.count, over: .query)
        let now = clock.now()
        let drinks = try validated(items) { input throws(ValidationError) in
            try validator.drink(from: input, now: now, defaultSource: source)
        }
        let result = try await store.apply(WriteBatch(drinks: drinks, explainDuplicates: true))
        count(result)
        var reply: [(String, JSONValue)] = [
            ("ok", true), ("anchor", .int(result.anchor)), ("added", .int(Int64(result.added))),
            ("duplicates", .int(Int64(result.duplicates))),
        ]
        if !result.deletedDuplicates.isEmpty {
            // Duplicates that were deletions: said so, with what would restore them.
            reply.append(
                (
                    "deletedDuplicates",
                    .array(
                        result.deletedDuplicates.map {
                            .object([("uuid", .string($0.uuid.uuidString)), ("version", .int($0.version))])
                        })
                ))
        }
        return .object(reply)
    }

    func delete(_ request: QueryRequest) async throws -> JSONValue {
        guard case .value(let items) = request.deletions else {
            throw QueryError(.badRequest, "deletions must be an array of deletion objects", field: "deletions")
        }
        counters.received(items.count, over: .query)
        let deletions = try validated(items) { input throws(ValidationError) in
            try validator.deletion(from: input)
        }
        let result = try await store.delete(deletions)
        count(result)
        return .object([
            ("ok", true), ("anchor", .int(result.anchor)), ("deleted", .int(Int64(result.deleted))),
            ("unknown", .int(Int64(result.unknown))),
        ])
    }

    /// Every element through `rule`, all or nothing; the first failure becomes
    /// `invalid_drink` naming its index and field.
    func validated<Input, Output>(_ inputs: [Input?], _ rule: (Input) throws(ValidationError) -> Output) throws(QueryError)
        -> [Output]
    {
        do throws(ValidationError) {
            return try BatchDecoder(validator: validator).validate(inputs, isArray: true, rule)
        } catch {
            throw QueryError(.invalidDrink, error.description, index: error.index, field: error.field)
        }
    }

    func count(_ result: WriteResult) {
        ServiceCounters.bump(counters.stored, by: result.added + result.deleted + result.unknown)
        ServiceCounters.bump(counters.duplicates, by: result.duplicates)
    }

    /// Under CURVE, an op needs its role: `write` for add and delete, `read`
    /// for the rest; a client whose key a reload removed has neither.
    private func authorize(_ op: String, _ caller: Caller) throws {
        guard let registry, case .client(let name) = caller else { return }
        let needed: Role = ["add", "delete", "backup"].contains(op) ? .write : .read
        guard let client = registry.client(named: name) else {
            throw QueryError(.forbidden, "client \(name) is no longer admitted (its key was removed from the clients directory)")
        }
        guard client.roles.contains(needed) else {
            throw QueryError(.forbidden, "client \(name) lacks the \(needed.rawValue) role that \(op) needs")
        }
    }

    func stats() async -> JSONValue {
        let s = await store.statistics()
        let c = counters
        return .object(
            [
                ("ok", true),
                ("anchor", .int(s.anchor)),
                ("received", .int(Int64(c.received.value))),
                ("stored", .int(Int64(c.stored.value))),
                ("duplicates", .int(Int64(c.duplicates.value))),
                ("rejected", .int(Int64(c.rejected.value))),
                ("requests", .int(Int64(c.requests.value))),
                ("filesProcessed", .int(Int64(c.filesProcessed.value))),
                ("filesFailed", .int(Int64(c.filesFailed.value))),
                ("subscribers", .int(Int64(c.subscribers.value))),
                ("updatesDropped", .int(Int64(c.updatesDropped.value))),
                ("authDenied", .int(Int64(c.authDenied.value))),
                ("fault", await store.faultDescription.map { .string($0) } ?? .null),
                ("uptimeS", .double((Date().timeIntervalSince(c.started) * 1000).rounded() / 1000)),
                ("storeBytes", .int(s.fileBytes)),
                ("commits", .int(s.commits)),
                ("purgedAnchor", .int(s.purgedAnchor)),
            ] + (following.map { [("followAnchor", .int($0.followAnchor)), ("followLagS", .double($0.lagSeconds()))] } ?? []))
    }
}
