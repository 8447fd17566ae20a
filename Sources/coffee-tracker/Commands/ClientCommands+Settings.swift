import CoffeeDomain
import CoffeeTrackerClient
import Foundation

/// `coffee-tracker settings` and `coffee-tracker catalogue` (docs/protocol.md
/// §15): each shows what the service goes by, or changes it when given options.
extension ClientCommands {
    /// The settings' options, by the setting each sets.
    static let settingsOptions = [
        ("half-life", "halfLifeHours"), ("sleep-threshold", "sleepThresholdMg"), ("daily-limit", "dailyLimitMg"),
        ("time-zone", "timeZone"), ("level-over", "levelOverMg"), ("bedtime", "bedtime"),
    ]

    static func settings(_ client: QueryClient, _ args: Arguments) throws {
        guard args.positional.isEmpty else { throw Arguments.UsageError(description: "settings takes no positional arguments") }
        var changes: [(String, JSONValue)] = []
        for (option, name) in settingsOptions {
            guard let text = args[option] else { continue }
            let isText = name == "timeZone" || name == "bedtime"
            changes.append((name, isText ? .string(text) : .double(try number(text, "--" + option))))
        }
        for word in (args["reset"] ?? "").split(separator: ",") {
            guard let (_, name) = settingsOptions.first(where: { $0.0 == word || $0.1 == word }) else {
                throw Arguments.UsageError(
                    description:
                        "--reset: unknown setting \"\(word)\"; the settings are \(settingsOptions.map(\.0).joined(separator: ", "))"
                )
            }
            changes.append((name, .null))
        }
        let reply =
            changes.isEmpty
            ? try request(client, [("op", .string(QueryOperation.settings.rawValue))], args)
            : try request(
                client, [("op", .string(QueryOperation.putSettings.rawValue)), ("settings", .object(changes))], args,
                what: "settings")
        guard !args.has("json") else { return }
        let values = reply["settings"] as? [String: Any] ?? [:]
        let defaults = reply["defaults"] as? [String: Any] ?? [:]
        for (option, name) in settingsOptions {
            let value = values[name].map { "\($0)" } ?? "?"
            let fallback = defaults[name].map { "\($0)" } ?? "?"
            let note = value == fallback ? "(the configuration's)" : "(the configuration says \(fallback))"
            print("\(option.padding(toLength: 16, withPad: " ", startingAt: 0)) \(value) \(note)")
        }
        print("anchor           \(reply["anchor"] ?? 0) (the settings' last change)")
    }

    static func catalogue(_ client: QueryClient, _ args: Arguments) throws {
        let reply: [String: Any]
        if let name = args.positional.first {
            guard args.positional.count == 1 else { throw Arguments.UsageError(description: "catalogue takes one NAME") }
            guard !(args.has("retire") && args.has("restore")) else {
                throw Arguments.UsageError(description: "catalogue: --retire and --restore contradict each other")
            }
            var entry: [(String, JSONValue)] = []
            if let mg = args["mg"] { entry.append(("mgCaffeine", .double(try number(mg, "--mg")))) }
            if args.has("retire") { entry.append(("retired", true)) }
            if args.has("restore") { entry.append(("retired", false)) }
            if let old = args["renamed-from"] { entry.append(("renamedFrom", .string(old))) }
            reply = try request(
                client,
                [("op", .string(QueryOperation.putCatalogue.rawValue)), ("name", .string(name)), ("entry", .object(entry))],
                args, what: "catalogue entry")
        } else {
            reply = try request(client, [("op", .string(QueryOperation.catalogue.rawValue))], args)
        }
        guard !args.has("json") else { return }
        for d in reply["drinks"] as? [[String: Any]] ?? [] {
            let name = "\(d["name"] ?? "?")".padding(toLength: 20, withPad: " ", startingAt: 0)
            let mg = formatNumber((d["mgCaffeine"] as? NSNumber)?.doubleValue ?? 0)
            let retired = (d["retired"] as? Bool) == true ? "  retired" : ""
            print("\(name) \(mg) mg\(retired)")
        }
        print("anchor \(reply["anchor"] ?? 0) (the catalogue's last change)")
    }
}

extension ClientCommands {
    /// `coffee-tracker push`: the Web Push subscriptions (§17), or one removed.
    static func push(_ client: QueryClient, _ args: Arguments) throws {
        guard args.positional.isEmpty else { throw Arguments.UsageError(description: "push takes no positional arguments") }
        if let id = args["remove"] {
            let reply = try request(
                client, [("op", .string(QueryOperation.pushUnsubscribe.rawValue)), ("id", .string(id))], args,
                what: "removal")
            if !args.has("json") {
                print((reply["removed"] as? Int ?? 0) == 1 ? "removed \(id)" : "no subscription \(id)")
            }
            return
        }
        let reply = try request(client, [("op", .string(QueryOperation.pushSubscriptions.rawValue))], args)
        guard !args.has("json") else { return }
        let all = reply["subscriptions"] as? [[String: Any]] ?? []
        for s in all { print("\(s["id"] ?? "?")  \(s["created"] ?? "?")  \(s["endpoint"] ?? "?")") }
        print("\(all.count) subscription\(all.count == 1 ? "" : "s")")
    }
}
