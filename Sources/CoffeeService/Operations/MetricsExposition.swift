import CoffeeLogging
import Foundation

/// The Prometheus text exposition (format 0.0.4) of the metrics of
/// docs/protocol.md §9: what `/metrics` serves. Built from a snapshot, so that
/// the format is tested without a running service.
public struct MetricsExposition {
    private var lines: [String] = []

    public init() {}

    /// Counters end in `_total`; units are base units (seconds, bytes).
    public mutating func counter(_ name: String, _ help: String, _ values: [([(String, String)], Double)]) {
        family(name, help, "counter", values)
    }

    public mutating func gauge(_ name: String, _ help: String, _ value: Double, labels: [(String, String)] = []) {
        family(name, help, "gauge", [(labels, value)])
    }

    /// A gauge with a value per set of labels.
    public mutating func gauge(_ name: String, _ help: String, _ values: [([(String, String)], Double)]) {
        family(name, help, "gauge", values)
    }

    public mutating func histogram(_ name: String, _ help: String, _ histogram: Histogram) {
        let (cumulative, sum, count) = histogram.snapshot()
        lines.append("# HELP \(name) \(help)")
        lines.append("# TYPE \(name) histogram")
        for (bound, n) in zip(histogram.bounds.map(Self.number) + ["+Inf"], cumulative) {
            lines.append("\(name)_bucket{le=\"\(bound)\"} \(n)")
        }
        lines.append("\(name)_sum \(Self.number(sum))")
        lines.append("\(name)_count \(count)")
    }

    private mutating func family(_ name: String, _ help: String, _ type: String, _ values: [([(String, String)], Double)]) {
        lines.append("# HELP \(name) \(help)")
        lines.append("# TYPE \(name) \(type)")
        for (labels, value) in values {
            let text = labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
            lines.append("\(name)\(text) \(Self.number(value))")
        }
    }

    public var text: String { lines.joined(separator: "\n") + "\n" }

    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    static func number(_ v: Double) -> String {
        if v.isNaN { return "NaN" }
        if v.isInfinite { return v > 0 ? "+Inf" : "-Inf" }
        return v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}

/// The process metrics every Prometheus exporter carries, read from /proc.
enum ProcessMetrics {
    static func cpuSeconds() -> Double {
        var usage = rusage()
        guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return 0 }
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    static func residentBytes() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Double(fields[1]) else { return 0 }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func openDescriptors() -> Double {
        Double((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0)
    }
}
