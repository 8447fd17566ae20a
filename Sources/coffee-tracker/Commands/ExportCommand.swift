import CoffeeDomain
import CoffeeService
import CoffeeTrackerClient
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `coffee-tracker export --csv`: every live drink, as `GET /api/v1/export.csv` gives it.
enum ExportCommand {
    static let help = """
        Usage: coffee-tracker export --csv [--out FILE] [--config FILE]

        Writes every live drink as CSV that a spreadsheet opens as it is
        (RFC 4180; docs/protocol.md §15): a header row
        uuid,date,mgCaffeine,type,version,source, then one drink a row, oldest
        first, its date in model.timeZone with the offset. The same as
        GET /api/v1/export.csv on the HTTP endpoint. Asks the running service
        for 5,000 drinks at a time and writes each page before the next, so
        that a store of any size is never held whole; with --out, the file
        appears (renamed into place) only once it is complete.

        Options:
          --csv              the format (the only one)
          --out FILE         write there (default: standard output)
          --config FILE      find the service, and its time zone, through this
                             configuration
          --query ENDPOINT   the query endpoint (default: from the configuration)
          --timeout SECONDS  how long to wait for each answer (default 30)
          --key FILE         this client's secret certificate, when the service
                             runs with security.curve
          --server-key KEY   the service's public key (default: endpoints.json)
          -h, --help         show this help
        """

    /// Drinks asked for at once.
    static let page = 5_000

    static func run(_ words: [String]) throws -> Int32 {
        let args = try Arguments(
            words, valued: ["out", "config", "query", "timeout", "key", "server-key"], switches: ["help", "csv"])
        if args.has("help") {
            print(help)
            return 0
        }
        guard args.has("csv") else { throw Arguments.UsageError(description: "export needs --csv (the only format)") }
        guard args.positional.isEmpty else { throw Arguments.UsageError(description: "export takes no positional arguments") }
        let configuration = try loadConfiguration(args["config"])
        let endpoint = try args["query"] ?? EndpointDiscovery.running(configuration.location).query
        let timeout = try args["timeout"].map { try ClientCommands.number($0, "--timeout") } ?? 30
        let curve = try ClientCurve.from(
            keyFile: args["key"], serverKey: args["server-key"], discovered: EndpointDiscovery.serverKey(configuration.location))
        let client = try QueryClient(endpoint: endpoint, timeout: timeout, curve: curve)
        // The person's zone as the service has it (their settings, §15), not the configuration's default.
        var times = HistoryCalendar.LocalTimes(HistoryCalendar(timeZone: try client.settings().timeZone))
        let output = try ExportOutput(path: args["out"])
        var out = Array(DrinkCSV.header.utf8)
        var from = min(configuration.limits.earliestDate, Date(timeIntervalSince1970: 0))
        let end = Date() + configuration.limits.maxFutureSkewS + 1
        var after: UUID?
        var count = 0
        // A page at a time, each written out before the next is asked for.
        do {
            while true {
                let page = try client.drinks(from: from, to: end, after: after, limit: Self.page)
                for drink in page.drinks { DrinkCSV.write(drink, times: &times, into: &out) }
                try output.write(out)
                out.removeAll(keepingCapacity: true)
                count += page.drinks.count
                guard page.more, let last = page.drinks.last else { break }
                (from, after) = (last.date, last.uuid)
            }
            try output.finish()
        } catch {
            output.abandon()  // no half export left behind under any name
            throw error
        }
        if let path = args["out"] { FileHandle.standardError.write(Data("wrote \(count) drinks to \(path)\n".utf8)) }
        return 0
    }
}

/// Where an export goes: standard output, or a file written beside its
/// name and renamed into place once complete and synced (so that a file of
/// that name is never half an export).
struct ExportOutput {
    /// A file that cannot be written: exit status 1, not a usage error's 2.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let handle: FileHandle
    private let path: String?
    private let partial: String?

    init(path: String?) throws {
        self.path = path
        guard let path else {
            handle = FileHandle.standardOutput
            partial = nil
            return
        }
        let partial = path + ".partial"
        guard FileManager.default.createFile(atPath: partial, contents: nil) else {
            throw Failure(description: "cannot write \(partial)")
        }
        handle = try FileHandle(forWritingTo: URL(fileURLWithPath: partial))
        self.partial = partial
    }

    func write(_ bytes: [UInt8]) throws { try handle.write(contentsOf: bytes) }

    /// Removes the partial file of an export that failed.
    func abandon() {
        guard let partial else { return }
        try? handle.close()
        unlink(partial)
    }

    func finish() throws {
        guard let path, let partial else { return }
        try handle.synchronize()
        try handle.close()
        guard rename(partial, path) == 0 else {
            throw Failure(description: "cannot rename \(partial) to \(path): \(String(cString: strerror(errno)))")
        }
    }
}
