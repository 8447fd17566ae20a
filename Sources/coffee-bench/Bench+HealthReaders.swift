import CoffeeDomain
import CoffeeService
import Foundation
import FoundationXML

#if canImport(Glibc)
    import Glibc
#endif

/// `coffee-bench health-readers FILE`: the two streaming readers the
/// project could use for a Health export, on the same file, in one process
/// (libxml2's first): libxml2's `xmlTextReader` (`HealthExportReader`, which
/// also makes the drinks) and FoundationXML's `XMLParser` on an
/// `InputStream` (a SAX delegate that only counts the caffeine records). One
/// JSON line: seconds, MB/s and the peak RSS after each.
enum HealthReadersBench {
    static func run(_ path: String) throws -> String {
        let size = Double((try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0)
        let t0 = Date()
        let file = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        let reader = try InboxFormat.healthExport.reader(
            for: .file(file), InboxFormat.Context(parser: InboxFileParser(decoder: BatchDecoder()), now: Date()))
        var drinks = 0
        while let batch = try reader.next() { drinks += batch.drinks.count }
        let libxml2 = Date().timeIntervalSince(t0)
        let libxml2Peak = peakRSS()

        final class Counter: NSObject, XMLParserDelegate {
            var caffeine = 0
            func parser(
                _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]
            ) {
                if name == "Record", attributes["type"] == "HKQuantityTypeIdentifierDietaryCaffeine" { caffeine += 1 }
            }
        }
        let t1 = Date()
        guard let stream = InputStream(fileAtPath: path) else { throw BenchError("cannot open \(path)") }
        let parser = XMLParser(stream: stream)
        let counter = Counter()
        parser.delegate = counter
        _ = parser.parse()
        let foundation = Date().timeIntervalSince(t1)
        return JSONValue.object([
            ("bytes", .double(size)), ("libxml2_s", .double(libxml2)), ("libxml2_mb_per_s", .double(size / 1e6 / libxml2)),
            ("libxml2_drinks", .int(Int64(drinks))), ("libxml2_peak_rss_mb", .double(libxml2Peak)),
            ("foundation_s", .double(foundation)), ("foundation_mb_per_s", .double(size / 1e6 / foundation)),
            ("foundation_caffeine_records", .int(Int64(counter.caffeine))), ("foundation_peak_rss_mb", .double(peakRSS())),
        ]).serialized()
    }

    /// The process's peak RSS so far (getrusage's maxrss), in MB.
    static func peakRSS() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) / 1024
    }
}
