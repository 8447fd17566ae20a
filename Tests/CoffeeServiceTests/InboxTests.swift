import CoffeeDomain
import CoffeeLogging
import Foundation
import HealthStore
import Synchronization
import Testing

@testable import CoffeeService

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Inbox watcher and importer", .timeLimit(.minutes(2)))
struct InboxTests {
    @Test func decodesKernelRecords() {
        let bytes =
            InboxWatcher.record(mask: UInt32(IN_CLOSE_WRITE), name: "a.json")
            + InboxWatcher.record(mask: UInt32(IN_MOVED_TO), name: "b.plist")
            + InboxWatcher.record(mask: UInt32(IN_CREATE), name: "link.json")
            + InboxWatcher.record(mask: UInt32(IN_Q_OVERFLOW))
            + InboxWatcher.record(mask: UInt32(IN_DELETE_SELF))
        #expect(InboxWatcher.decode(bytes) == [.file("a.json"), .file("b.plist"), .created("link.json"), .rescan, .folderGone])
    }

    @Test func ignoredNamesAndFormats() {
        for name in [".x.json", "a.json.tmp", "a.json.part", "a.json.partial", "a.json~"] {
            #expect(InboxFileParser.isIgnored(name), "\(name)")
        }
        #expect(!InboxFileParser.isIgnored("a.json"))
        #expect(InboxFormat.of("A.JSON") == .json)
        #expect(InboxFormat.of("a.ndjson") == .jsonLines)
        #expect(InboxFormat.of("CoffeeTracker.plist") == .propertyList)
        #expect(InboxFormat.of("a.txt") == nil)
        #expect(InboxFormat.of("export.XML") == .healthExport)
        #expect(InboxFormat.of("export.zip") == .healthExportZip)
    }

    /// The one list of formats: no name claimed twice, each found by its
    /// own names, and each format's reader hands out what the file holds,
    /// counting it; a format that streams does so in batches of the
    /// context's size.
    @Test func formatsAreOneRegistry() throws {
        let all = InboxFormat.all.flatMap(\.extensions)
        #expect(Set(all).count == all.count)
        for format in InboxFormat.all {
            for name in format.extensions { #expect(InboxFormat.of("a" + name.uppercased()) == format) }
            #expect(InboxFormat.names.contains(format.extensions[0]))
        }
        #expect(InboxFormat.all.filter(\.skipsBadRecords).allSatisfy { $0.sizeLimit == .export && $0.streams })

        let parser = InboxFileParser(decoder: BatchDecoder())
        let drinks = (0..<7).map { _ in #"{"uuid":"\#(UUID())","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}"# }
        let context = InboxFormat.Context(parser: parser, now: .distantFuture, chunkSize: 3)
        var sizes: [Int] = []
        let lines = try InboxFormat.jsonLines.reader(for: .bytes(Data(drinks.joined(separator: "\n").utf8)), context)
        while let batch = try lines.next() { sizes.append(batch.count) }
        #expect(sizes == [3, 3, 1] && lines.changesRead == 7 && lines.summary == nil)

        sizes = []
        let document = try InboxFormat.json.reader(for: .bytes(Data(("[" + drinks.joined(separator: ",") + "]").utf8)), context)
        while let batch = try document.next() { sizes.append(batch.count) }
        #expect(sizes == [7] && document.changesRead == 7)

        #expect {
            _ = try InboxFormat.healthExport.reader(for: .bytes(Data("<HealthData/>".utf8)), context)
        } throws: { error in
            (error as? InboxFileError)?.description.contains("read from its file") == true
        }
    }

    @Test func jsonLinesErrorsNameTheLine() {
        let parser = InboxFileParser(decoder: BatchDecoder())
        let good = #"{"uuid":"\#(UUID())","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}"#
        let text = good + "\n\n" + #"{"delete":"\#(UUID())"}"# + "\n" + #"{"uuid":"\#(UUID())","date":"2026-11-29T08:00:00Z"}"#
        #expect {
            _ = try parser.parse(Data(text.utf8), format: .jsonLines, now: .distantFuture)
        } throws: { error in
            let e = error as! InboxFileError
            return e.line == 4 && e.field == "mgCaffeine"
        }
        let ok = try? parser.parse(
            Data((good + "\n" + #"{"delete":"\#(UUID())"}"#).utf8), format: .jsonLines, now: .distantFuture)
        #expect(ok?.drinks.count == 1 && ok?.deletions.count == 1)
    }

    /// A drink after a deletion of the same UUID must not be reordered
    /// before it: the reader ends a chunk there.
    @Test func jsonLinesKeepTheirOrderAcrossKinds() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-order-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try HealthStore(
            configuration: .init(path: dir.appendingPathComponent("s.sqlite").path), logger: Logger(label: "test"))
        let id = UUID()
        let text = [
            #"{"uuid":"\#(id)","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}"#,
            #"{"delete":"\#(id)"}"#,
            #"{"uuid":"\#(id)","mgCaffeine":7,"date":"2026-11-29T08:00:00Z","version":2}"#,
        ].joined(separator: "\n")
        let reader = JSONLinesReader(data: Data(text.utf8), parser: InboxFileParser(decoder: BatchDecoder()), now: .distantFuture)
        let result = try await store.applyStream { try reader.next() }
        #expect(result.anchor == 3)
        let live = try await store.changes(since: nil, limit: 10).added
        #expect(live.map(\.mgCaffeine) == [7])
        await store.close()
    }

    /// Lines that straddle the reader's 1 MiB pieces come out whole, and an
    /// error past the first piece names the right line.
    @Test func readerStreamsAFileAcrossPieces() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ct-lines-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: url) }
        let lines = (0..<20_000).map { _ in #"{"uuid":"\#(UUID())","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}"# }
        try Data((lines.joined(separator: "\n")).utf8).write(to: url)  // no final newline
        #expect(try FileManager.default.attributesOfItem(atPath: url.path)[.size] as! Int > JSONLinesReader.pieceSize)
        let parser = InboxFileParser(decoder: BatchDecoder())
        let reader = JSONLinesReader(file: try FileHandle(forReadingFrom: url), parser: parser, now: .distantFuture)
        var chunks = 0
        var drinks = 0
        while let chunk = try reader.next() {
            chunks += 1
            drinks += chunk.drinks.count
        }
        #expect(drinks == 20_000 && chunks == 4 && reader.changesRead == 20_000)
        // The same bytes from memory are read in the same pieces, to the same drinks.
        let fromMemory = JSONLinesReader(data: try Data(contentsOf: url), parser: parser, now: .distantFuture)
        var remembered: [UUID] = []
        while let chunk = try fromMemory.next() { remembered += chunk.drinks.map(\.uuid) }
        #expect(remembered.map(\.uuidString) == lines.map { String($0.dropFirst(9).prefix(36)) })

        var broken = lines
        broken[19_000] = #"{"uuid":"\#(UUID())","mgCaffeine":-1,"date":"2026-11-29T08:00:00Z"}"#
        try Data((broken.joined(separator: "\n") + "\n").utf8).write(to: url)
        let again = JSONLinesReader(file: try FileHandle(forReadingFrom: url), parser: parser, now: .distantFuture)
        #expect {
            while try again.next() != nil {}
        } throws: { error in
            (error as? InboxFileError)?.line == 19_001
        }
    }

    /// An inbox folder in `dir`, a store and an importer of that folder, prepared.
    static func importer(in dir: URL, settleTime: TimeInterval) async throws -> (URL, HealthStore, InboxImporter) {
        let inbox = dir.appendingPathComponent("inbox")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
        let store = try HealthStore(
            configuration: .init(path: dir.appendingPathComponent("s.sqlite").path), logger: Logger(label: "test"))
        var configuration = InboxImporter.Configuration(inbox: inbox)
        configuration.maxFileBytes = 1 << 20
        configuration.settleTime = settleTime
        let importer = InboxImporter(
            configuration: configuration, parser: InboxFileParser(decoder: BatchDecoder()), store: store,
            counters: ServiceCounters(), clock: SystemClock(), logger: Logger(label: "test"))
        try await importer.prepare()
        return (inbox, store, importer)
    }

    /// A close or rename event means the writer is done: the file imports at
    /// once, however fresh. A scan leaves a fresh file for later, since it
    /// may still be being written in place.
    @Test func closedFilesImportAtOnceAndScannedFreshOnesWait() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-inbox-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (inbox, store, importer) = try await Self.importer(in: dir, settleTime: 3600)
        for name in ["scanned.json", "closed.json"] {
            let drink = #"[{"uuid":"\#(UUID())","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}]"#
            try Data(drink.utf8).write(to: inbox.appendingPathComponent(name))
        }
        await importer.scan()
        #expect(await store.anchor == 0)
        await importer.handle([.file("closed.json")])
        let processed = try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("processed").path)
        #expect(processed == ["closed.json"])
        #expect(FileManager.default.fileExists(atPath: inbox.appendingPathComponent("scanned.json").path))
        #expect(await store.anchor == 1)
        await importer.close()
        await store.close()
    }

    /// IN_Q_OVERFLOW (events lost) makes the importer rescan the folder. The
    /// overflow comes through an injected event source: a pipe carrying the
    /// kernel's record, so the machine's inotify limits are never touched.
    @Test func overflowTriggersAFullRescan() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-inbox-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (inbox, store, importer) = try await Self.importer(in: dir, settleTime: 0)
        // Files whose events were lost.
        for i in 0..<3 {
            let drink = #"[{"uuid":"\#(UUID())","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}]"#
            try Data(drink.utf8).write(to: inbox.appendingPathComponent("lost-\(i).json"))
        }
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[1]) }
        let watcher = InboxWatcher(readingFrom: ends[0])
        let (stream, continuation) = AsyncStream.makeStream(of: [InboxEvent].self)
        try watcher.start(logger: Logger(label: "test")) { continuation.yield($0) }
        let record = InboxWatcher.record(mask: UInt32(IN_Q_OVERFLOW))
        #expect(record.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) } == record.count)
        let events = try #require(await first(of: stream, within: .seconds(10)), "the overflow record raised no event")
        #expect(events == [.rescan])
        await importer.handle(events)
        watcher.cancel()
        let processed = try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("processed").path)
        #expect(processed.sorted() == ["lost-0.json", "lost-1.json", "lost-2.json"])
        #expect(await store.anchor == 3)
        await importer.close()
        await store.close()
    }
}

@Suite("BatchHandoff: reading overlaps storing", .timeLimit(.minutes(2)))
struct BatchHandoffTests {
    static func batch(_ n: Int) -> WriteBatch { WriteBatch(deletions: [Deletion(uuid: UUID(), version: Int64(n))]) }

    @Test func batchesArriveInOrderThenTheEnd() throws {
        let handoff = BatchHandoff(capacity: 2)
        let produced = Mutex(0)
        handoff.start(name: "test-reader") {
            produced.withLock { n -> WriteBatch? in
                guard n < 10 else { return nil }
                n += 1
                return Self.batch(n)
            }
        }
        var versions: [Int64] = []
        while let b = try handoff.take() { versions.append(b.deletions[0].version!) }
        #expect(versions == Array(1...10))
        #expect(try handoff.take() == nil)
    }

    @Test func theProducersErrorComesAfterWhatItReadBefore() throws {
        let handoff = BatchHandoff(capacity: 2)
        let produced = Mutex(0)
        handoff.start(name: "test-reader") {
            try produced.withLock { n throws -> WriteBatch? in
                guard n < 3 else { throw InboxFileError("line 4: bad", line: 4) }
                n += 1
                return Self.batch(n)
            }
        }
        for _ in 0..<3 { #expect(try handoff.take() != nil) }
        #expect(throws: InboxFileError("line 4: bad", line: 4)) { try handoff.take() }
    }

    /// A taker that gives up (the store failed) stops an endless producer,
    /// which never holds more than `capacity` batches.
    @Test func abandonStopsTheProducer() async throws {
        let handoff = BatchHandoff(capacity: 2)
        let produced = Mutex(0)
        handoff.start(name: "test-reader") {
            produced.withLock { n -> WriteBatch? in
                n += 1
                return Self.batch(n)
            }
        }
        _ = try handoff.take()
        handoff.abandon()
        try await Task.sleep(for: .milliseconds(100))
        let after = produced.withLock { $0 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(produced.withLock { $0 } == after)
        #expect(after <= 4)  // 1 taken, 2 waiting, 1 refused
    }
}

/// The first element `stream` yields, or nil if none comes within `limit`:
/// a wait that fails instead of hanging.
func first<T: Sendable>(of stream: AsyncStream<T>, within limit: Duration) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask {
            for await element in stream { return element }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        let result = await group.next() ?? nil
        group.cancelAll()
        return result
    }
}
