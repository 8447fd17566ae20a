import Foundation
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// Writes each record as one line to stderr, as text or as a JSON object.
///
/// Text: `2026-11-29T13:00:00.000Z info store: committed anchor=42 count=3`,
/// metadata sorted by key so lines diff cleanly. When stderr is the journal
/// (`journal`: systemd's `JOURNAL_STREAM` names it), a text line starts
/// with its syslog priority, `<6>`, and carries no timestamp of its own:
/// the journal keeps both.
public struct StderrLogHandler: LogHandler {
    public enum Format: String, Sendable { case text, json }
    public let format: Format
    public let journal: Bool

    public init(format: Format, journal: Bool = false) {
        self.format = format
        self.journal = journal
    }

    /// Whether stderr is the journal: `JOURNAL_STREAM` ("device:inode")
    /// names the file stderr is.
    public static var stderrIsJournal: Bool {
        guard let value = ProcessInfo.processInfo.environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":").compactMap { UInt64($0) }
        var info = stat()
        guard parts.count == 2, (try? Syscall.call("fstat", "stderr") { fstat(2, &info) }) != nil else { return false }
        return UInt64(info.st_dev) == parts[0] && UInt64(info.st_ino) == parts[1]
    }

    /// The syslog priority of `level` (sd-daemon(3)).
    public static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    public func emit(_ record: LogRecord) {
        var line =
            journal && format == .text
            ? "<\(Self.priority(record.level))>" + Self.render(record, format: format, timestamp: false)
            : Self.render(record, format: format)
        line.append("\n")
        // One write(2) per line, so lines from several threads never interleave.
        let bytes = Array(line.utf8)
        // A log line that cannot be written (stderr closed) has nowhere to be reported.
        bytes.withUnsafeBytes { buffer in
            do { try Syscall.writeAll(2, buffer, detail: "stderr") } catch {}
        }
    }

    /// The line for `record`, without its newline.
    public static func render(_ record: LogRecord, format: Format, timestamp: Bool = true) -> String {
        let stamp = LogTimestamp.string(record.date)
        switch format {
        case .text:
            var line = (timestamp ? "\(stamp) " : "") + "\(record.level.rawValue) \(record.label): \(record.message)"
            for key in record.metadata.keys.sorted() {
                line += " \(key)=\(quoteIfNeeded(record.metadata[key]!))"
            }
            return line
        case .json:
            // Numbers as numbers: metadata that reads as one is written as one.
            var object: [String: Any] = record.metadata.mapValues { value -> Any in
                if let n = Int64(value) { return n }
                if let d = Double(value), d.isFinite, value.contains(where: \.isNumber), !value.contains(where: \.isLetter) {
                    return d
                }
                return value
            }
            object["at"] = stamp
            object["level"] = record.level.rawValue
            object["label"] = record.label
            object["message"] = record.message
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
    }

    private static func quoteIfNeeded(_ value: String) -> String {
        if value.isEmpty || value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline }) {
            let escaped = value.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: "\\n")
            return "\"\(escaped)\""
        }
        return value
    }
}

/// UTC timestamps with milliseconds, without a formatter object.
enum LogTimestamp {
    static func string(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let millis = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ v: Int32, _ width: Int = 2) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday))T"
            + "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec)).\(pad(Int32(millis), 3))Z"
    }
}
