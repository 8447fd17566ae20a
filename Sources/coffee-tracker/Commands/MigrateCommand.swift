import CoffeeDomain
import CoffeeService
import Foundation
import HealthStore

/// `migrate --from FILE.sqlite --config CONFIG`: a SQLite store copied into
/// the PostgreSQL database that CONFIG names (docs/protocol.md §11).
enum MigrateCommand {
    static let help = """
        Usage: coffee-tracker migrate --from FILE.sqlite --config CONFIG

        Copies a SQLite store (a service's <dataDirectory>/coffee-tracker.sqlite,
        its service stopped, or a backup) into the PostgreSQL database that
        CONFIG's store.postgresql names, which must hold no change yet: every
        drink and tombstone under its own anchor, with the time of its change
        (tombstones expire when they would have), the store's anchor, its
        purged anchor and its identity (store and epoch). Clients that follow
        the file's store go on following the database's without a resync.
        One transaction: an interrupted migration leaves the database as it
        was. Progress goes to stderr.

        Options:
          --from FILE     the SQLite store to copy (required)
          --config FILE   the configuration with store.postgresql (required)
          -h, --help      show this help
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try Arguments(words, valued: ["from", "config"], switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        guard args.positional.isEmpty else { throw Arguments.UsageError(description: "migrate takes no FILE; use --from FILE") }
        guard let from = args["from"] else {
            throw Arguments.UsageError(description: "migrate needs --from FILE.sqlite: the store to copy")
        }
        guard let configPath = args["config"] else {
            throw Arguments.UsageError(description: "migrate needs --config CONFIG: the configuration names the database")
        }
        let configuration = try loadConfiguration(configPath)
        guard let conninfo = configuration.store.postgresql else {
            printError(
                "coffee-tracker migrate: \(configPath) has no store.postgresql: the store it names is the SQLite file itself; nothing to migrate into"
            )
            return 1
        }
        guard FileManager.default.fileExists(atPath: from) else {
            printError("coffee-tracker migrate: \(from) does not exist")
            return 1
        }
        var lastShown = Date.distantPast
        do {
            let result = try HealthStore.migrate(from: from, to: conninfo) { copied, total in
                guard Date().timeIntervalSince(lastShown) > 1 || copied == total else { return }
                lastShown = Date()
                printError("migrate: \(copied) of \(total) records copied")
            }
            print(
                "migrated \(from) into \(configuration.storeName): \(result.drinks) drinks, \(result.tombstones) tombstones, anchor \(result.anchor), purged anchor \(result.purgedAnchor), store \(UUIDText.string(result.identity.store)), epoch \(result.identity.epoch)"
            )
            return 0
        } catch {
            printError("coffee-tracker migrate: \(error); nothing was copied")
            return 1
        }
    }
}
