import CoffeeDomain
import CoffeeService
import CoffeeTrackerClient
import Foundation
import HealthStore

#if canImport(Glibc)
    import Glibc
#endif

/// `import FILE...`: one-shot import through the running service.
enum ImportCommand {
    static let help = """
        Usage: coffee-tracker import FILE... [--config FILE] [--query ENDPOINT] [--timeout SECONDS]
                                             [--key FILE] [--server-key KEY]

        Imports exported files (.json, .jsonl/.ndjson, .plist — the watch app's
        CoffeeTracker.plist as it is) through the running service's query
        endpoint. Each file is read and validated whole first: a file with any
        bad element sends nothing, and the error names its index or line and
        field. Then its drinks and deletions go in chunks, each chunk one
        durable commit; importing the same file again adds nothing. A progress
        bar shows on a terminal; a summary follows (added, duplicates, deleted,
        time). Without a running service it refuses, naming the endpoint.
        --timeout is how long each chunk may take (default 30 s). Under
        security.curve, --key names this client's secret certificate and
        --server-key the service's public key (default: endpoints.json).
        """

    /// Drinks per request: well below limits.maxMessageBytes for any valid drink.
    static let chunk = 2000

    static func run(_ words: [String]) throws -> Int32 {
        let args = try Arguments(words, valued: ["config", "query", "timeout", "key", "server-key"], switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        guard !args.positional.isEmpty else { throw Arguments.UsageError(description: "import needs at least one FILE") }
        let configuration = try loadConfiguration(args["config"])
        let endpoint = try args["query"] ?? EndpointDiscovery.running(configuration.location).query
        let timeout = args["timeout"].flatMap(Double.init) ?? 30
        let curve = try ClientCurve.from(
            keyFile: args["key"], serverKey: args["server-key"], discovered: EndpointDiscovery.serverKey(configuration.location))
        let client = try QueryClient(endpoint: endpoint, timeout: timeout, curve: curve)
        do {
            _ = try client.ping()
        } catch {
            printError(
                "coffee-tracker import: the service is not running (no answer at \(endpoint)); start it with `coffee-tracker serve`, or drop the files into its inbox folder"
            )
            return 1
        }
        let parser = InboxFileParser(
            decoder: BatchDecoder(validator: DrinkValidator(limits: configuration.drinkLimits)))
        var failures = 0
        for path in args.positional {
            let started = Date()
            guard let format = InboxFileParser.format(of: path) else {
                printError("\(path): unknown file type; expected .json, .jsonl, .ndjson or .plist")
                failures += 1
                continue
            }
            // Validate the whole file first; then send it in order, chunk by chunk.
            let data: Data
            var total = 0
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
                if format == .jsonLines {
                    let reader = JSONLinesReader(data: data, parser: parser, now: Date(), chunkSize: chunk)
                    while let part = try reader.nextChunk() { total += part.count }
                } else {
                    total = try parser.parse(data, format: format, now: Date()).count
                }
            } catch {
                printError("\(path): \(error)")
                failures += 1
                continue
            }
            let progress = Progress(total: total, label: (path as NSString).lastPathComponent)
            var totals = (added: 0, duplicates: 0, deleted: 0, unknown: 0)
            func send(_ part: WriteBatch) throws {
                if !part.drinks.isEmpty {
                    let reply = try client.add(part.drinks)
                    totals.added += reply.added
                    totals.duplicates += reply.duplicates
                }
                if !part.deletions.isEmpty {
                    let reply = try client.delete(part.deletions)
                    totals.deleted += reply.deleted
                    totals.unknown += reply.unknown
                }
                progress.advance(part.count)
            }
            if format == .jsonLines {
                let reader = JSONLinesReader(data: data, parser: parser, now: Date(), chunkSize: chunk)
                while let part = try reader.nextChunk() { try send(part) }
            } else {
                let batch = try parser.parse(data, format: format, now: Date())
                for start in stride(from: 0, to: batch.drinks.count, by: chunk) {
                    try send(WriteBatch(drinks: Array(batch.drinks[start..<min(start + chunk, batch.drinks.count)])))
                }
                for start in stride(from: 0, to: batch.deletions.count, by: chunk) {
                    try send(WriteBatch(deletions: Array(batch.deletions[start..<min(start + chunk, batch.deletions.count)])))
                }
            }
            progress.finish()
            print(
                String(
                    format: "%@: added %d, duplicates %d, deleted %d, unknown %d, %.2f s", path, totals.added,
                    totals.duplicates, totals.deleted, totals.unknown, Date().timeIntervalSince(started)))
        }
        return failures == 0 ? 0 : 1
    }

    /// A progress bar on stderr when it is a terminal; silent otherwise.
    final class Progress {
        let total: Int
        let label: String
        var done = 0
        let enabled = isatty(2) != 0

        init(total: Int, label: String) {
            self.total = total
            self.label = label
            draw()
        }

        func advance(_ n: Int) {
            done += n
            draw()
        }

        func draw() {
            guard enabled, total > 0 else { return }
            let width = 30
            let filled = done * width / total
            let bar = String(repeating: "=", count: filled) + String(repeating: " ", count: width - filled)
            FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(done * 100 / total)% \(done)/\(total)".utf8))
        }

        func finish() {
            if enabled && total > 0 { FileHandle.standardError.write(Data("\n".utf8)) }
        }
    }
}
