import CoffeeDomain
import CoffeeService
import CoffeeTrackerClient
import Foundation
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `watch`: follows the service through the client library's follower
/// (`FeedFollower`, docs/protocol.md §10), so it survives restarts and dropped
/// messages by the same code every consumer uses.
enum WatchCommand {
    static let help = """
        Usage: coffee-tracker watch [--updates ENDPOINT] [--query ENDPOINT] [--config FILE] [--count N] [--timeout SECONDS]

        Follows the service: subscribes to live updates, reads the store's
        changes from the query endpoint, and keeps both in step through
        restarts, dropped messages and expired anchors. On a terminal it
        redraws one view: caffeine now with its level colour, cups today, a
        sparkline of the next 24 h, the anchor and the drinks held. Elsewhere
        it prints one line per state: "state JSON" with anchor, drinks (how
        many), digest (of their UUIDs), model (its anchor, or null), mgCaffeine,
        applied, resyncs, and store and epoch. When the store or its epoch
        changes (a restore, a promotion, another service) it reads everything
        again from the start and says so once, on stderr.
          --count N          stop after N states
          --timeout SECONDS  how long without reaching the service before it gives
                             up (default 5; 0 waits for ever); on a terminal it
                             waits for ever, saying how long it has been
          --key FILE         this client's secret certificate, under security.curve
          --server-key KEY   the service's public key (default: endpoints.json via --config)
        """

    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(
            words, valued: ["config", "updates", "query", "count", "timeout", "key", "server-key"], switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        let configuration = try loadConfiguration(args["config"])
        let location = configuration.location
        let given = (query: args["query"], updates: args["updates"])
        for endpoint in [given.query, given.updates].compactMap({ $0 }) { try EndpointDiscovery.checkScheme(endpoint) }
        // A service that is gone: say so now.
        if given.query == nil || given.updates == nil { _ = try EndpointDiscovery.running(location) }
        let limit = args["count"].flatMap { Int($0) } ?? Int.max
        let seconds = args["timeout"].flatMap { Double($0) } ?? 5
        let tty = isatty(1) != 0
        let curve = try ClientCurve.from(
            keyFile: args["key"], serverKey: args["server-key"], discovered: EndpointDiscovery.serverKey(location))
        let states = FeedFollower.follow(
            locate: {
                let found = EndpointDiscovery.endpoints(location)
                return (given.query ?? found.query, given.updates ?? found.updates)
            }, curve: curve, timeout: tty || seconds <= 0 ? nil : .milliseconds(Int64(seconds * 1000)),
            requestTimeout: min(5, max(1, seconds)))
        var seen = 0
        var lastModel: ModelSnapshot?
        var identityChanges = 0
        do {
            for try await state in states {
                seen += 1
                if state.identityChanges > identityChanges {
                    identityChanges = state.identityChanges
                    lastModel = nil
                    printError(
                        "coffee-tracker watch: the service's store changed (now \(state.identity.map(\.description) ?? "unknown")): restored, promoted or another one; read everything again from the start"
                    )
                }
                if tty {
                    if let model = state.model { lastModel = model }
                    draw(lastModel, state: state)
                } else {
                    print("state " + describe(state).serialized())
                    fflush(nil)
                }
                if seen >= limit { break }
            }
        } catch {
            printError(
                "coffee-tracker watch: \(error); is the service running? (under security.curve, the key needs the subscribe role)"
            )
            return 1
        }
        return 0
    }

    /// A state as one JSON line; `digest` is the XOR of the first 8 bytes
    /// (big-endian) of every UUID held, in hex: order-free, so a test can
    /// compare it with the store's.
    static func describe(_ state: FeedState) -> JSONValue {
        var digest: UInt64 = 0
        for uuid in state.drinks.keys {
            digest ^= withUnsafeBytes(of: uuid.uuid) { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
        }
        return .object([
            ("anchor", .int(state.anchor)), ("drinks", .int(Int64(state.drinks.count))),
            ("digest", .string(String(digest, radix: 16))), ("model", state.model.map { .int($0.anchor) } ?? .null),
            ("mgCaffeine", state.model.map { .double($0.mgCaffeine) } ?? .null), ("applied", .int(Int64(state.applied))),
            ("resyncs", .int(Int64(state.resyncs))), ("reconnecting", .bool(state.reconnecting)),
            ("store", state.identity.map { .string(UUIDText.string($0.store)) } ?? .null),
            ("epoch", state.identity.map { .int($0.epoch) } ?? .null),
            // What the person set, as the feed carries it (docs/protocol.md §15).
            (
                "settings",
                .object(
                    state.settings.sorted { $0.key < $1.key }.map { scope, names in
                        (scope, .object(names.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
                    })
            ),
        ])
    }

    static func draw(_ model: ModelSnapshot?, state: FeedState) {
        let mg = model?.mgCaffeine ?? 0
        let level = model?.level.rawValue ?? "green"
        let colour = ["green": "32", "yellow": "33", "red": "31"][level] ?? "0"
        let cups = model?.cupsToday ?? 0
        let points = model?.timeline.map(\.mgCaffeine) ?? []
        print("\u{1B}[H\u{1B}[2J", terminator: "")
        print("Coffee Tracker — live")
        print(String(format: "caffeine  \u{1B}[%@m%.1f mg (%@)\u{1B}[0m", colour, mg, level))
        print(String(format: "cups      %.2f today", cups))
        let top = points.max() ?? 0
        print("next 24 h \(sparkline(points, width: 48))  top \(Int(top.rounded())) mg")
        print(
            "          now" + String(repeating: " ", count: 7) + "+6 h" + String(repeating: " ", count: 8) + "+12 h"
                + String(repeating: " ", count: 7) + "+18 h" + String(repeating: " ", count: 4) + "+24 h")
        print("anchor    \(state.anchor)   drinks \(state.drinks.count)   model of \(model.map { "\($0.anchor)" } ?? "?")")
        if state.reconnecting { print("the service is silent: reconnecting…") }
        fflush(nil)
    }

    /// Block characters for values, resampled to `width` columns.
    static func sparkline(_ values: [Double], width: Int) -> String {
        guard !values.isEmpty else { return "" }
        let bars = Array("▁▂▃▄▅▆▇█")
        let top = max(values.max() ?? 0, 1e-9)
        return String(
            (0..<min(width, values.count)).map { i in
                let v = values[i * values.count / min(width, values.count)]
                return bars[min(bars.count - 1, Int(v / top * Double(bars.count - 1)))]
            })
    }
}
