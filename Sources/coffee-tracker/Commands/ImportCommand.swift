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
        CoffeeTracker.plist as it is — and Apple Health exports, export.xml or
        the export.zip holding it) through the running service's query
        endpoint. A Health export is read as a stream: its caffeine records
        go in chunks as they are read, a record that breaks a drink rule is
        skipped and listed at the end, and the progress bar counts bytes. Each file is read and validated whole first: a file with any
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
                printError("\(path): unknown file type; expected \(InboxFileParser.Format.names)")
                failures += 1
                continue
            }
            if format.isHealthExport {
                do {
                    try importExport(path, client: client, validator: parser.decoder.validator)
                } catch {
                    printError("\(path): \(error)")
                    failures += 1
                }
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

    /// An Apple Health export, streamed: each batch of caffeine drinks is one
    /// `add`, progress is bytes read, and the summary ends it.
    static func importExport(_ path: String, client: QueryClient, validator: DrinkValidator) throws {
        let started = Date()
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        let reader = try HealthExportReader(path: path, validator: validator, now: Date())
        let progress = Progress(total: size, label: (path as NSString).lastPathComponent, unit: "bytes")
        var added = 0
        var duplicates = 0
        while let batch = try reader.next() {
            if !batch.drinks.isEmpty {
                let reply = try client.add(batch.drinks)
                added += reply.added
                duplicates += reply.duplicates
            }
            // A zip's bytes read are its XML's, past the file's size: the bar stops at 99%.
            progress.set(min(Int(reader.bytesRead), max(size - 1, 0)))
        }
        progress.set(size)
        progress.finish()
        let s = reader.summary
        print(
            String(
                format: "%@: %d records, %d of caffeine: added %d, duplicates %d, skipped %d, %.2f s", path, s.records,
                s.caffeineRecords, added, duplicates, s.skippedTotal, Date().timeIntervalSince(started)))
        for skipped in s.skipped.prefix(10) { print("  skipped line \(skipped.line): \(skipped.reason)") }
        if s.skippedTotal > 10 { print("  … and \(s.skippedTotal - 10) more") }
    }

    /// A progress bar on stderr when it is a terminal; silent otherwise.
    final class Progress {
        let total: Int
        let label: String
        let unit: String
        var done = 0
        let enabled = isatty(2) != 0

        init(total: Int, label: String, unit: String = "") {
            self.total = total
            self.label = label
            self.unit = unit
            draw()
        }

        func advance(_ n: Int) {
            set(done + n)
        }

        func set(_ n: Int) {
            done = n
            draw()
        }

        func draw() {
            guard enabled, total > 0 else { return }
            let width = 30
            let filled = done * width / total
            let bar = String(repeating: "=", count: filled) + String(repeating: " ", count: width - filled)
            let suffix = unit.isEmpty ? "" : " " + unit
            FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(done * 100 / total)% \(done)/\(total)\(suffix)".utf8))
        }

        func finish() {
            if enabled && total > 0 { FileHandle.standardError.write(Data("\n".utf8)) }
        }
    }
}
