import CoffeeLogging
import CoffeeService
import CoffeeTrackerClient
import Foundation
import SQLite
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `coffee-tracker`: the service and its client, in one executable.
@main
struct CoffeeTrackerCLI {
    static let commands: [(String, String)] = [
        ("serve", "run the service in the foreground until SIGINT or SIGTERM"),
        ("ping", "print the store's anchor (the service answers)"),
        ("add", "add a drink through the query endpoint"),
        ("delete", "delete a drink by UUID"),
        ("changes", "list what changed since an anchor"),
        ("drinks", "list the live drinks of the last 24 hours (or --from, --to)"),
        ("history", "mg, cups, peak and hours over the sleep threshold by day, week or month"),
        ("export", "write every live drink as CSV (--csv) for a spreadsheet"),
        ("settings", "show or change the person's half-life, sleep threshold, daily limit, time zone"),
        ("catalogue", "list the person's drinks, or add, change, rename or retire one"),
        ("model", "show caffeine now, levels, cups today"),
        ("push-key", "print the service's Web Push public key (what a page subscribes with)"),
        ("push", "list the phones told by Web Push, or remove one (--remove ID)"),
        ("watch", "print live updates from the update endpoint"),
        ("import", "import exported files (.json, .jsonl, .plist, Health .xml/.zip) through the service"),
        ("status", "show the service's counters"),
        ("backup", "copy the running service's store, as of one anchor, into its backup folder"),
        ("restore", "put a backup in place of the store, the service stopped"),
        ("migrate", "copy a SQLite store into an empty PostgreSQL database"),
        ("relay", "forward the update feed to many subscribers, keeping the last model"),
        ("keygen", "write a CURVE key pair as ZeroMQ certificates (NAME.key, NAME.key_secret)"),
        ("token", "make a token for the HTTP endpoint (Authorization: Bearer), with its roles"),
        ("check", "check a configuration and its key files without starting anything"),
    ]

    /// This build's version, with the libraries it runs on.
    static var version: String {
        "coffee-tracker \(CoffeeTrackerVersion.number) (libzmq \(ZMQContext.version), SQLite \(SQLiteVersion.text))"
    }

    static let usage = """
        coffee-tracker — keeps a person's caffeine intake and tells screens about it, live.

        Usage: coffee-tracker COMMAND [OPTIONS]

        Commands:
        \(commands.map { "  " + $0.0.padding(toLength: 10, withPad: " ", startingAt: 0) + $0.1 }.joined(separator: "\n"))

        Run `coffee-tracker COMMAND --help` for a command's options;
        `coffee-tracker --version` for the version.
        Exit status: 0 success, 1 runtime failure, 2 bad usage.
        """

    static func main() async {
        let args = Array(CommandLine.arguments.dropFirst())
        guard let command = args.first else {
            printError(usage)
            exit(2)
        }
        let rest = Array(args.dropFirst())
        let code: Int32
        do {
            switch command {
            case "-h", "--help", "help":
                print(usage)
                code = 0
            case "--version", "version":
                print(version)
                code = 0
            case "check": code = try CheckCommand.run(rest)
            case "serve": code = try await ServeCommand.run(rest)
            case let name where ClientCommands.operation(name) != nil:
                code = try ClientCommands.run(ClientCommands.operation(name)!, rest)
            case "restore": code = try RestoreCommand.run(rest)
            case "migrate": code = try MigrateCommand.run(rest)
            case "watch": code = try await WatchCommand.run(rest)
            case "import": code = try ImportCommand.run(rest)
            case "keygen": code = try KeygenCommand.run(rest)
            case "token": code = try TokenCommand.run(rest)
            case "export": code = try ExportCommand.run(rest)
            case "relay": code = try await RelayCommand.run(rest)
            default:
                printError("coffee-tracker: unknown command \"\(command)\"\n\n\(usage)")
                code = 2
            }
        } catch let error as Arguments.UsageError {
            printError("coffee-tracker \(command): \(error)\nRun `coffee-tracker \(command) --help` for usage.")
            code = 2
        } catch let error as EndpointDiscovery.SchemeMissing {
            printError("coffee-tracker \(command): \(error)\nRun `coffee-tracker \(command) --help` for usage.")
            code = 2
        } catch {
            printError("coffee-tracker \(command): \(error)")
            code = 1
        }
        exit(code)
    }
}

func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    FileHandle.standardError.write(Data(line.utf8))
}

/// The configuration a command uses: `--config FILE`, else the default file
/// when it exists, else the embedded defaults.
/// The configuration file a command reads: `--config`, else
/// `config/coffee-tracker.json` when it exists; nil for the embedded defaults.
func configurationPath(_ path: String?) -> String? {
    if let path { return path }
    let fallback = "config/coffee-tracker.json"
    return FileManager.default.fileExists(atPath: fallback) ? fallback : nil
}

func loadConfiguration(_ path: String?) throws -> ServiceConfiguration {
    if let path { return try ConfigurationLoader.load(path: path) }
    let fallback = "config/coffee-tracker.json"
    if FileManager.default.fileExists(atPath: fallback) { return try ConfigurationLoader.load(path: fallback) }
    return ConfigurationLoader.defaults(relativeTo: FileManager.default.currentDirectoryPath)
}

extension ServiceConfiguration {
    /// Where the clients find the service this configuration describes.
    var location: ServiceLocation {
        ServiceLocation(
            dataDirectory: dataDirectory, query: query.bind.first ?? ServiceLocation(dataDirectory: "").query,
            updates: updates.bind.first ?? ServiceLocation(dataDirectory: "").updates,
            ingest: ingest.bind.first ?? ServiceLocation(dataDirectory: "").ingest)
    }
}
