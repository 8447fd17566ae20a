import CoffeeDomain
import CoffeeService
import CoffeeTrackerClient
import Foundation

/// One command per query operation (`QueryOperation`; `stats` is `status`):
/// one request to the query endpoint each.
enum ClientCommands {
    /// The operation a command name stands for.
    static func operation(_ command: String) -> QueryOperation? {
        switch command {
        case "status": .stats
        case "push-key": .pushKey
        case "push": .pushSubscriptions
        // `settings`, `catalogue` and `push` with options put; a browser subscribes.
        case "stats", "putSettings", "putCatalogue", "pushKey", "pushSubscribe", "pushUnsubscribe", "pushSubscriptions": nil
        default: QueryOperation(rawValue: command)
        }
    }

    /// The command name of an operation.
    static func command(_ op: QueryOperation) -> String {
        switch op {
        case .stats: "status"
        case .pushKey: "push-key"
        case .pushSubscribe, .pushUnsubscribe, .pushSubscriptions: "push"
        default: op.rawValue
        }
    }

    static func run(_ op: QueryOperation, _ words: [String]) throws -> Int32 {
        let args = try Arguments(
            words,
            valued: [
                "config", "query", "timeout", "type", "mg", "date", "uuid", "version", "source", "since", "limit", "at", "key",
                "server-key", "svg", "from", "to", "by", "half-life", "sleep-threshold", "daily-limit", "time-zone", "reset",
                "renamed-from", "level-over", "bedtime", "remove",
            ],
            switches: ["help", "json", "retire", "restore"])
        if args.has("help") {
            print(help(op) + "\n\nOptions:\n" + common)
            return 0
        }
        let configuration = try loadConfiguration(args["config"])
        let endpoint = try args["query"] ?? EndpointDiscovery.running(configuration.location).query
        let timeout = try args["timeout"].map { try number($0, "--timeout") } ?? 5
        let curve = try ClientCurve.from(
            keyFile: args["key"], serverKey: args["server-key"], discovered: EndpointDiscovery.serverKey(configuration.location))
        let client = try QueryClient(endpoint: endpoint, timeout: timeout, curve: curve)

        switch op {
        case .ping:
            let reply = try request(client, [("op", .string(QueryOperation.ping.rawValue))], args)
            if !args.has("json") { print("anchor \(reply["anchor"] ?? 0)") }
        case .add:
            guard args.positional.isEmpty else { throw Arguments.UsageError(description: "add takes no positional arguments") }
            guard args["type"] != nil || args["mg"] != nil else {
                throw Arguments.UsageError(description: "add needs --type TYPE or --mg MG")
            }
            var drink: [(String, JSONValue)] = [
                ("uuid", .string(args["uuid"] ?? UUID().uuidString)),
                ("date", .string(args["date"] ?? RFC3339.string(Date()))),
            ]
            if let t = args["type"] { drink.append(("type", .string(t))) }
            if let mg = args["mg"] { drink.append(("mgCaffeine", .double(try number(mg, "--mg")))) }
            if let v = args["version"] { drink.append(("version", .double(try number(v, "--version")))) }
            if let s = args["source"] { drink.append(("source", .string(s))) }
            let reply = try request(
                client, [("op", .string(QueryOperation.add.rawValue)), ("drinks", .array([.object(drink)]))], args, what: "drink")
            if !args.has("json") {
                let uuid = drink.first { $0.0 == "uuid" }.map { "\($0.1)" } ?? ""
                let anchor = reply["anchor"] ?? 0
                if let deleted = (reply["deletedDuplicates"] as? [[String: Any]])?.first {
                    let version = (deleted["version"] as? NSNumber)?.int64Value ?? 1
                    print(
                        "nothing added: \(unquoted(uuid)) was deleted (a tombstone with version \(version) is kept, so an older copy stays deleted); to restore it, add it again with --version \(version + 1)"
                    )
                } else if (reply["added"] as? NSNumber)?.intValue == 0 {
                    print(
                        "nothing added: \(unquoted(uuid)) is already stored with this version or a higher one; to replace it, add it with a higher --version"
                    )
                } else {
                    let stored = try? request(
                        client,
                        [
                            ("op", .string(QueryOperation.changes.rawValue)),
                            ("anchor", .int(max(0, ((anchor as? NSNumber)?.int64Value ?? 1) - 1))),
                            ("limit", 1),
                        ], Arguments([], valued: [], switches: []))
                    let d = (stored?["added"] as? [[String: Any]])?.first ?? [:]
                    print("added \(describe(d)), anchor \(anchor)")
                }
            }
        case .delete:
            guard args.positional.count == 1 else { throw Arguments.UsageError(description: "delete needs exactly one UUID") }
            var deletion: [(String, JSONValue)] = [("uuid", .string(args.positional[0]))]
            if let v = args["version"] { deletion.append(("version", .double(try number(v, "--version")))) }
            let reply = try request(
                client, [("op", .string(QueryOperation.delete.rawValue)), ("deletions", .array([.object(deletion)]))], args,
                what: "deletion")
            if !args.has("json") {
                let uuid = args.positional[0].uppercased()
                if (reply["deleted"] as? NSNumber)?.intValue == 1 {
                    print("deleted \(uuid), anchor \(reply["anchor"] ?? 0)")
                } else {
                    print(
                        "no live drink has UUID \(uuid): a tombstone is stored (or was already), so a later copy of it stays deleted; check the UUID with `coffee-tracker changes`"
                    )
                }
            }
        case .changes:
            var anchor: JSONValue = .null
            if let since = args["since"] {
                guard let n = Int64(since), n >= 0 else {
                    throw Arguments.UsageError(description: "--since needs an anchor (a whole number >= 0), got \"\(since)\"")
                }
                anchor = .int(n)
            }
            let limit = try args["limit"].map { try number($0, "--limit") } ?? 1000
            while true {
                let reply = try request(
                    client, [("op", .string(QueryOperation.changes.rawValue)), ("anchor", anchor), ("limit", .double(limit))],
                    args)
                if !args.has("json") {
                    for d in reply["added"] as? [[String: Any]] ?? [] {
                        print("+ \(d["uuid"] ?? "") \(d["mgCaffeine"] ?? "") \(d["date"] ?? "") \(d["type"] ?? "-")")
                    }
                    for d in reply["deleted"] as? [[String: Any]] ?? [] {
                        print("- \(d["uuid"] ?? "") v\(d["version"] ?? "")")
                    }
                }
                let next = (reply["anchor"] as? NSNumber)?.int64Value ?? 0
                anchor = .int(next)
                if (reply["hasMore"] as? Bool) != true {
                    if !args.has("json") { print("anchor \(next)") }
                    break
                }
            }
        case .model where args["svg"] != nil:
            try drawModel(client, args)
        case .backup:
            guard args.positional.count == 1 else { throw Arguments.UsageError(description: "backup needs exactly one NAME") }
            let reply = try request(
                client, [("op", .string(QueryOperation.backup.rawValue)), ("name", .string(args.positional[0]))], args,
                what: "backup")
            if !args.has("json") {
                print("\(reply["file"] ?? "?"): anchor \(reply["anchor"] ?? 0), \(reply["bytes"] ?? 0) bytes")
            }
        case .model:
            var modelRequest: [(String, JSONValue)] = [("op", .string(QueryOperation.model.rawValue))]
            if let at = args["at"] { modelRequest.append(("at", .string(at))) }
            let reply = try request(client, modelRequest, args)
            if !args.has("json") { print(explain(model: reply)) }
        case .drinks:
            var drinksRequest: [(String, JSONValue)] = [("op", .string(QueryOperation.drinks.rawValue))]
            for name in ["from", "to"] { if let date = args[name] { drinksRequest.append((name, .string(date))) } }
            let reply = try request(client, drinksRequest, args)
            if !args.has("json") {
                let drinks = reply["drinks"] as? [[String: Any]] ?? []
                for d in drinks {
                    let mg = formatNumber((d["mgCaffeine"] as? NSNumber)?.doubleValue ?? 0)
                    print("\(d["date"] ?? "?") \(mg) mg \(d["type"] ?? "-") \(d["uuid"] ?? "?") v\(d["version"] ?? 1)")
                }
                let counted = "\(drinks.count) drink\(drinks.count == 1 ? "" : "s")"
                print("\(counted) from \(reply["from"] ?? "?") to \(reply["to"] ?? "?")")
            }
        case .history:
            var historyRequest: [(String, JSONValue)] = [("op", .string(QueryOperation.history.rawValue))]
            for name in ["from", "to", "by"] { if let value = args[name] { historyRequest.append((name, .string(value))) } }
            let reply = try request(client, historyRequest, args)
            if !args.has("json") { print(table(history: reply)) }
        case .settings, .putSettings: try settings(client, args)
        case .pushKey:
            let reply = try request(client, [("op", .string(QueryOperation.pushKey.rawValue))], args)
            if !args.has("json") { print(reply["publicKey"] ?? "") }
        case .pushSubscribe, .pushUnsubscribe, .pushSubscriptions: try push(client, args)
        case .catalogue, .putCatalogue: try catalogue(client, args)
        case .stats:
            let reply = try request(client, [("op", .string(QueryOperation.stats.rawValue))], args)
            if !args.has("json") {
                for key in reply.keys.sorted() where key != "ok" {
                    print("\(key.padding(toLength: 15, withPad: " ", startingAt: 0)) \(reply[key]!)")
                }
            }
        }
        return 0
    }

    /// Sends a request; prints the raw reply with --json; turns an error
    /// reply into a failure worded for a person (`what` names the thing sent).
    static func request(_ client: QueryClient, _ members: [(String, JSONValue)], _ args: Arguments, what: String = "request")
        throws -> [String: Any]
    {
        let reply = try client.call(.object(members))
        if args.has("json"), let data = try? JSONSerialization.data(withJSONObject: reply, options: [.sortedKeys]) {
            print(String(decoding: data, as: UTF8.self))
        }
        guard reply["ok"] as? Bool == true else {
            let error = reply["error"] as? [String: Any] ?? [:]
            var message = "\(error["message"] ?? "no message")"
            if message.hasPrefix("element 0: ") { message.removeFirst("element 0: ".count) }  // one thing was sent
            let code = error["code"] as? String ?? "error"
            let lead =
                switch code {
                case "invalid_drink": "the service refused the \(what)"
                case "bad_request" where what != "request": "the service refused the \(what)"
                case "bad_request": "the service could not read the request"
                case "forbidden": "not allowed"
                case "unavailable": "the service cannot take it now"
                case "anchor_expired": "that anchor is too old"
                case "too_large": "the request is too large"
                default: "the service failed (\(code))"
                }
            throw QueryClient.Failure(description: "\(lead): \(message)")
        }
        return reply
    }

    /// "doubleEspresso 128 mg at 2026-…, 6F1C…" for a drink as the wire has it.
    static func describe(_ d: [String: Any]) -> String {
        let mg = (d["mgCaffeine"] as? NSNumber)?.doubleValue ?? 0
        let type = d["type"].map { "\($0) " } ?? ""
        return "\(type)\(formatNumber(mg)) mg at \(d["date"] ?? "?"), uuid \(d["uuid"] ?? "?")"
    }

    static func unquoted(_ text: String) -> String { text.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }

    static func formatNumber(_ v: Double) -> String {
        v == v.rounded() ? String(Int(v)) : String(format: "%.1f", v)
    }

    /// The model as a person reads it: rounded, with what each figure means.
    static func explain(model reply: [String: Any]) -> String {
        let mg = (reply["mgCaffeine"] as? NSNumber)?.doubleValue ?? 0
        let cups = (reply["cupsToday"] as? NSNumber)?.doubleValue ?? 0
        let drinks = (reply["drinksToday"] as? NSNumber)?.intValue ?? 0
        let halfLife = (reply["halfLifeHours"] as? NSNumber)?.doubleValue ?? 5
        let level = reply["level"] as? String ?? "?"
        let cupsLevel = reply["cupsLevel"] as? String ?? "?"
        return [
            "caffeine  \(Int(mg.rounded())) mg in the body now: \(level) (green under 200 mg, yellow under 400, red above; half-life \(formatNumber(halfLife)) h)",
            "cups      \(String(format: "%.1f", cups)) today, counting one cup as 96 mg (a small coffee): \(cupsLevel) (green under 3, yellow under 5, red above)",
            "drinks    \(drinks) \(drinks == 1 ? "drink" : "drinks") since midnight",
            "at        \(reply["at"] ?? "?") (anchor \(reply["anchor"] ?? 0): the store's changes this model includes)",
        ].joined(separator: "\n")
    }

    static func number(_ text: String, _ flag: String) throws -> Double {
        guard let v = Double(text), v.isFinite else {
            throw Arguments.UsageError(description: "\(flag) needs a number, got \"\(text)\"")
        }
        return v
    }
}
