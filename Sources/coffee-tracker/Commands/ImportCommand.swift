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

        Imports exported files (\(InboxFormat.names): JSON, JSON Lines,
        property lists — the watch app's CoffeeTracker.plist as it is — and
        Apple Health exports, export.xml or the export.zip holding it) through
        the running service's query endpoint. Each file is read and validated
        whole first: a file with any bad element sends nothing, and the error
        names its index or line and field. Then its drinks and deletions go in
        chunks, each chunk one durable commit; importing the same file again
        adds nothing. A Health export is read as a stream instead: its
        caffeine records go in chunks as they are read, a record that breaks
        a drink rule is skipped and listed at the end, and the progress bar
        counts bytes. A progress
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
            do {
                try importFile(path, client: client, parser: parser)
            } catch {
                printError("\(path): \(error)")
                failures += 1
            }
        }
        return failures == 0 ? 0 : 1
    }

    /// One file, in the way its format asks: a format that skips bad
    /// records (a Health export) is sent as it is read, progress by bytes,
    /// ending with its summary; any other is read and validated whole first
    /// (a bad element sends nothing), then sent in order, chunk by chunk.
    static func importFile(_ path: String, client: QueryClient, parser: InboxFileParser) throws {
        let started = Date()
        guard let format = InboxFormat.of(path) else {
            throw InboxFileError("unknown file type; expected \(InboxFormat.names)")
        }
        let file: FileHandle
        do {
            file = try InboxImporter.open(path)
        } catch {
            throw InboxFileError("cannot be read (\(error))")
        }
        let context = InboxFormat.Context(parser: parser, now: Date(), chunkSize: chunk)
        let label = (path as NSString).lastPathComponent
        let progress: Progress
        if format.skipsBadRecords {
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
            progress = Progress(total: size, label: label, unit: "bytes")
        } else {
            var total = 0
            let check = try format.reader(for: .file(file), context)
            while let part = try check.next() { total += part.count }
            try file.seek(toOffset: 0)
            progress = Progress(total: total, label: label)
        }
        let reader = try format.reader(for: .file(file), context)
        var totals = (added: 0, duplicates: 0, deleted: 0, unknown: 0)
        while let batch = try reader.next() {
            for part in batch.chunks(of: chunk) {
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
                if !format.skipsBadRecords { progress.advance(part.count) }
            }
            // A zip's bytes read are its XML's, past the file's size: the bar stops at 99%.
            if format.skipsBadRecords { progress.set(min(Int(reader.bytesRead), max(progress.total - 1, 0))) }
        }
        progress.set(progress.total)
        progress.finish()
        let seconds = Date().timeIntervalSince(started)
        guard let s = reader.summary else {
            print(
                String(
                    format: "%@: added %d, duplicates %d, deleted %d, unknown %d, %.2f s", path, totals.added,
                    totals.duplicates, totals.deleted, totals.unknown, seconds))
            return
        }
        print(
            String(
                format: "%@: %d records, %d of caffeine: added %d, duplicates %d, skipped %d, %.2f s", path, s.records,
                s.caffeineRecords, totals.added, totals.duplicates, s.skippedTotal, seconds))
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

extension WriteBatch {
    /// The batch as requests of at most `size` changes, in its order: its
    /// drinks, then its deletions (as one batch applies them).
    fileprivate func chunks(of size: Int) -> [WriteBatch] {
        stride(from: 0, to: drinks.count, by: size).map {
            WriteBatch(drinks: Array(drinks[$0..<min($0 + size, drinks.count)]))
        }
            + stride(from: 0, to: deletions.count, by: size).map {
                WriteBatch(deletions: Array(deletions[$0..<min($0 + size, deletions.count)]))
            }
    }
}
