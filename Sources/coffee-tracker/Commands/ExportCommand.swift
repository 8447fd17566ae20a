import CoffeeDomain
import CoffeeService
import CoffeeTrackerClient
import Foundation

/// `coffee-tracker export --csv`: every live drink, as `GET /api/v1/export.csv` gives it.
enum ExportCommand {
    static let help = """
        Usage: coffee-tracker export --csv [--out FILE] [--config FILE]

        Writes every live drink as CSV that a spreadsheet opens as it is
        (RFC 4180; docs/protocol.md §15): a header row
        uuid,date,mgCaffeine,type,version,source, then one drink a row, oldest
        first, its date in model.timeZone with the offset. The same as
        GET /api/v1/export.csv on the HTTP endpoint. Asks the running service
        a year at a time.

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
        let calendar = HistoryCalendar(timeZone: try client.settings().timeZone)
        var out = DrinkCSV.header
        var start = min(configuration.limits.earliestDate, Date(timeIntervalSince1970: 0))
        let end = Date() + configuration.limits.maxFutureSkewS + 1
        var count = 0
        while start < end {
            let stop = min(end, start + 366 * 86_400)
            for drink in try client.drinks(from: start, to: stop) where drink.date < stop {
                out += DrinkCSV.row(drink, in: calendar)
                count += 1
            }
            start = stop
        }
        if let path = args["out"] {
            try Data(out.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            FileHandle.standardError.write(Data("wrote \(count) drinks to \(path)\n".utf8))
        } else {
            FileHandle.standardOutput.write(Data(out.utf8))
        }
        return 0
    }
}
