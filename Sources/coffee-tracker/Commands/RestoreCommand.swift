import CoffeeDomain
import CoffeeService
import Foundation
import HealthStore
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// `restore FILE --config CONFIG`: a backup put in place of the store.
enum RestoreCommand {
    static let help = """
        Usage: coffee-tracker restore FILE --config CONFIG

        Puts a backup (from `coffee-tracker backup NAME`, or any copy of a
        store) in place of the store of the service that CONFIG describes,
        while that service is stopped. The copy is checked first (SQLite's
        integrity check, that it is a coffee-tracker store, a schema this
        build reads); then the store it replaces is kept beside it as
        coffee-tracker.sqlite.before-restore-TIME, and the checked copy takes
        its place in one rename, fsynced. The model's cache is dropped (it is
        rebuilt from the store at the next start). Refused while a service
        holds the data directory.

        Options:
          --config FILE   the service's configuration (required: it names the store)
          -h, --help      show this help
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try Arguments(words, valued: ["config"], switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        guard args.positional.count == 1 else { throw Arguments.UsageError(description: "restore needs exactly one FILE") }
        guard let configPath = args["config"] else {
            throw Arguments.UsageError(
                description: "restore needs --config CONFIG: the configuration names the store it replaces")
        }
        let configuration = try loadConfiguration(configPath)
        if configuration.store.postgresql != nil {
            printError(
                "coffee-tracker restore: \(configPath) puts the store in PostgreSQL, which is restored with PostgreSQL's own tools (pg_restore, a base backup); to copy a SQLite store into it, use coffee-tracker migrate"
            )
            return 1
        }
        let file = args.positional[0]
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        guard let lock = try DirectoryLock.take(directory: configuration.dataDirectory) else {
            printError(
                "coffee-tracker restore: a running service holds \(configuration.dataDirectory); stop it first (systemctl stop coffee-tracker), then restore"
            )
            return 1
        }
        defer { withExtendedLifetime(lock) {} }
        do {
            // The model's cache names the store and epoch it was made from: the
            // service rebuilds it at its next start (the restore raised the epoch).
            let result = try HealthStore.restore(from: file, to: configuration.storePath)
            print(
                "restored \(file) as \(configuration.storePath): anchor \(result.anchor), store \(UUIDText.string(result.identity.store)), epoch \(result.identity.epoch)"
            )
            if let kept = result.kept { print("the store it replaced is kept as \(kept)") }
            return 0
        } catch let refusal as RestoreRefusal {
            printError("coffee-tracker restore: \(refusal); nothing was changed")
            return 1
        }
    }
}
