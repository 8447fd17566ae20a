import CoffeeAlerts
import CoffeeDomain
import CoffeeLogging
import CoffeeModel
import Foundation
import HealthStore

/// Answers query requests (docs/protocol.md §4): one JSON request in, one JSON
/// reply out, never silence. Independent of sockets, so it is tested directly.
public struct QueryHandler: Sendable {
    public static let defaultLimit = 1000
    public static let maxLimit = 10_000

    let store: HealthStore
    /// The model, brought up to date with every commit before it is read.
    let model: ModelService
    let validator: DrinkValidator
    let clock: any WallClock
    let counters: ServiceCounters
    /// `limits.maxMessageBytes`: larger requests get `too_large`.
    let maxMessageBytes: Int
    /// The admitted clients under CURVE: each op needs its role.
    let registry: ClientRegistry?
    /// `store.backupDirectory`: where `backup` writes.
    let backupDirectory: String?
    /// A standby's follower (docs/protocol.md §11): writes are refused, `stats` tells the lag.
    let following: FollowStatus?
    /// The person's half-life, time zone, sleep threshold, daily limit and catalogue (§15), as they are now.
    /// The person's settings, which the store owns (§15).
    var settings: LiveSettings { store.liveSettings }
    /// The alerts' and the broker's state, for `stats` (§16); nil on a standby.
    let outbound: Outbound?

    /// Who sent a request.
    public enum Caller: Sendable {
        /// Plaintext: on this machine, trusted.
        case local
        /// Through CURVE: the client's name (ZeroMQ's `User-Id`).
        case client(String)
        /// The HTTP endpoint's JSON API (§12): the token's name, nil without tokens.
        case http(token: String?)

        /// A drink's `source` when it names none (docs/protocol.md §6, §12).
        var source: String {
            switch self {
            case .local: "query"
            case .client(let name): "query:" + name
            case .http(let token): token.map { "http:" + $0 } ?? "http"
            }
        }

        /// Where its drinks count as received.
        var channel: ServiceCounters.Channel {
            if case .http = self { return .http }
            return .query
        }
    }
    let logger: Logger
    /// The service's Web Push key (§17); nil in tests that need none.
    let pushKey: WebPush.Key?

    var caffeine: CaffeineModel { model.caffeine }

    public init(
        store: HealthStore, model: ModelService, validator: DrinkValidator,
        counters: ServiceCounters, clock: any WallClock,
        maxMessageBytes: Int = IngestEndpoint.Configuration.defaultMaxMessageBytes, registry: ClientRegistry? = nil,
        backupDirectory: String? = nil, following: FollowStatus? = nil,
        outbound: Outbound? = nil, pushKey: WebPush.Key? = nil, logger: Logger
    ) {
        self.pushKey = pushKey
        self.outbound = outbound
        self.following = following
        self.backupDirectory = backupDirectory
        self.logger = logger
        self.registry = registry
        self.store = store
        self.model = model
        self.validator = validator
        self.clock = clock
        self.counters = counters
        self.maxMessageBytes = maxMessageBytes
    }

    /// The reply to `body`.
    ///
    /// - Parameter draining: the service is shutting down: the request gets `unavailable`.
    public func handle(_ body: Data, draining: Bool = false, caller: Caller = .local) async -> Data {
        await outcome { try await reply(to: body, draining: draining, caller: caller) }.json.data()
    }

    /// The reply to a request already read (the JSON API's, made from its
    /// route), and its refusal's code when it is one.
    public func answer(_ request: JSONValue, caller: Caller) async -> Outcome {
        await outcome { try await reply(toRequest: request, caller: caller) }
    }

    /// A reply, and its error's code when it is a refusal.
    public struct Outcome: Sendable {
        public var json: JSONValue
        public var error: QueryError.Code?
    }

    func outcome(_ body: () async throws -> JSONValue) async -> Outcome {
        ServiceCounters.bump(counters.requests)
        let error: QueryError
        do {
            return Outcome(json: try await body(), error: nil)
        } catch let refusal as QueryError {
            if [.badRequest, .invalidDrink, .tooLarge].contains(refusal.code) { ServiceCounters.bump(counters.queryRejected) }
            error = refusal
        } catch let failure as StoreError where failure.isAnchorExpired {
            error = QueryError(.anchorExpired, failure.message)
        } catch let failure as StoreError where failure.isUnavailable {
            error = QueryError(.unavailable, failure.message)
        } catch let failure as StoreError where failure.isClosed {
            error = QueryError(.unavailable, "the service is shutting down")
        } catch {
            logger.error("request failed", metadata: ["error": "\(error)"])
            return Outcome(json: QueryError(.internal, "\(error)").json, error: .internal)
        }
        return Outcome(json: error.json, error: error.code)
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
        return try await reply(toRequest: value, caller: caller)
    }

    func reply(toRequest value: JSONValue, caller: Caller) async throws -> JSONValue {
        guard case .object = value else { throw QueryError(.badRequest, "request must be a JSON object with an \"op\"") }
        let request = QueryRequest(json: value)
        let name: String
        switch request.op {
        case .value(let v): name = v
        case .absent: throw QueryError(.badRequest, "op is required", field: "op")
        case .wrongType: throw QueryError(.badRequest, "op must be a string", field: "op")
        }
        guard let op = QueryOperation(rawValue: name) else {
            throw QueryError(.badRequest, "unknown op \"\(name.prefix(40))\"; expected \(QueryOperation.names)", field: "op")
        }
        try authorize(op, caller)
        if let following, op.refusedOnStandby {
            throw QueryError(
                .readOnly, "this service is a standby of \(following.primary): send \(op.rawValue) to the primary", field: "op")
        }
        switch op {
        case .ping:
            // As of the last commit, without waiting for the store's thread
            // (an inbox file's transaction holds it for the whole file).
            let (anchor, identity) = try await identified { store.statistics().anchor }
            return .object([("ok", true)] + identity.members + [("anchor", .int(anchor))])
        case .changes: return try await changes(request)
        case .model: return try await modelReply(request)
        case .add: return try await add(request, caller: caller)
        case .delete: return try await delete(request, caller: caller)
        case .stats: return await stats()
        case .backup: return try await backup(request)
        case .drinks: return try await drinks(request)
        case .history: return try await history(request)
        case .settings: return settingsReply()
        case .putSettings: return try await putSettings(value)
        case .catalogue: return catalogueReply()
        case .putCatalogue: return try await putCatalogue(value)
        case .pushKey: return try pushKeyReply()
        case .pushSubscribe: return try await pushSubscribe(value)
        case .pushUnsubscribe: return try await pushUnsubscribe(value)
        case .pushSubscriptions: return try pushSubscriptionsReply()
        }
    }

    /// A request's date field: nil when absent, refused naming `field` when it is not a date.
    static func date(_ input: InputField<InputDate>, field: String) throws(QueryError) -> Date? {
        switch input {
        case .absent: return nil
        case .wrongType(let expected): throw QueryError(.badRequest, "\(field) must be \(expected)", field: field)
        case .value(let raw):
            do throws(ValidationError) {
                return try DrinkValidator.date(raw, field: field)
            } catch {
                throw QueryError(.badRequest, error.reason, field: field)
            }
        }
    }

    /// - Parameter caller: a CURVE client's drinks default to the source
    ///   "query:<client name>" (docs/protocol.md §6).
    func add(_ request: QueryRequest, caller: Caller = .local) async throws -> JSONValue {
        guard case .value(let items) = request.drinks else {
            throw QueryError(.badRequest, "drinks must be an array of drink objects", field: "drinks")
        }
        counters.received(items.count, over: caller.channel)
        let now = clock.now()
        let drinks = try validated(items) { input throws(ValidationError) in
            try validator.drink(from: input, now: now, defaultSource: caller.source)
        }
        return try await stored(drinks)
    }

    /// `add`'s commit and reply, once its drinks are read: answered after the commit is durable.
    func stored(_ drinks: [Drink]) async throws -> JSONValue {
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

    func delete(_ request: QueryRequest, caller: Caller = .local) async throws -> JSONValue {
        guard case .value(let items) = request.deletions else {
            throw QueryError(.badRequest, "deletions must be an array of deletion objects", field: "deletions")
        }
        counters.received(items.count, over: caller.channel)
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

    /// Under CURVE, an op needs its role: `admin` for the settings, `write`
    /// for the other writes, `read` for the rest; a client whose key a
    /// reload removed has none.
    private func authorize(_ op: QueryOperation, _ caller: Caller) throws {
        guard let registry, case .client(let name) = caller else { return }
        let needed: Role = op.administers ? .admin : op.writes ? .write : .read
        guard let client = registry.client(named: name) else {
            throw QueryError(.forbidden, "client \(name) is no longer admitted (its key was removed from the clients directory)")
        }
        guard client.roles.contains(needed) else {
            throw QueryError(.forbidden, "client \(name) lacks the \(needed.rawValue) role that \(op.rawValue) needs")
        }
    }
}
