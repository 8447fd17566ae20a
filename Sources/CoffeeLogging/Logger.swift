import Foundation
import Synchronization

/// A value-type logger in the shape of swift-log: a label, seven levels,
/// `key=value` metadata, and a process-wide handler that tests can replace.
public struct Logger: Sendable {
    /// Severity, lowest first.
    public enum Level: String, Sendable, CaseIterable, Comparable {
        case trace, debug, info, notice, warning, error, critical

        var rank: Int { Self.allCases.firstIndex(of: self)! }
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rank < rhs.rank }
    }

    /// Key-value pairs beside a message: `metadata: ["file": "\(name)"]`.
    public typealias Metadata = [String: MetadataValue]

    /// A metadata value: text, written as a string literal or interpolation
    /// (as swift-log's `Logger.MetadataValue` is, which has more cases).
    public enum MetadataValue: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByStringInterpolation,
        CustomStringConvertible
    {
        case string(String)

        public init(stringLiteral value: String) { self = .string(value) }
        public var description: String {
            switch self {
            case .string(let text): text
            }
        }
    }

    /// A log message: a string literal or interpolation (swift-log's `Logger.Message`).
    public struct Message: Sendable, ExpressibleByStringLiteral, ExpressibleByStringInterpolation, CustomStringConvertible {
        public let description: String
        public init(stringLiteral value: String) { description = value }
    }

    public let label: String
    public var metadata: Metadata

    public init(label: String, metadata: Metadata = [:]) {
        self.label = label
        self.metadata = metadata
    }

    /// A part's logger: this one's metadata under the part's label, with
    /// `metadata` added. The composition root makes one logger and hands
    /// each part its own from it, so that what the root says (a standby's
    /// `role`, say) is on every part's lines.
    public func part(_ label: String, metadata: Metadata = [:]) -> Logger {
        var merged = self.metadata
        for (key, value) in metadata { merged[key] = value }
        return Logger(label: label, metadata: merged)
    }

    /// Logs `message` when `level` is at or above the system's threshold.
    ///
    /// The message and metadata are autoclosures, so that a filtered-out
    /// line costs nothing. The signatures are swift-log's (less `source`,
    /// `file`, `function` and `line`), so call sites would compile against it.
    public func log(level: Level, _ message: @autoclosure () -> Message, metadata: @autoclosure () -> Metadata? = nil) {
        let system = LoggingSystem.shared
        guard level >= system.level else { return }
        var merged = self.metadata
        for (key, value) in metadata() ?? [:] { merged[key] = value }
        system.handler.emit(
            LogRecord(
                date: Date(), level: level, label: label, message: message().description,
                metadata: merged.mapValues(\.description)))
    }

    public func trace(_ message: @autoclosure () -> Message, metadata: @autoclosure () -> Metadata? = nil) {
        log(level: .trace, message(), metadata: metadata())
    }
    public func debug(_ message: @autoclosure () -> Message, metadata: @autoclosure () -> Metadata? = nil) {
        log(level: .debug, message(), metadata: metadata())
    }
    public func info(_ message: @autoclosure () -> Message, metadata: @autoclosure () -> Metadata? = nil) {
        log(level: .info, message(), metadata: metadata())
    }
    public func notice(_ message: @autoclosure () -> Message, metadata: @autoclosure () -> Metadata? = nil) {
        log(level: .notice, message(), metadata: metadata())
    }
    public func warning(_ message: @autoclosure () -> Message, metadata: @autoclosure () -> Metadata? = nil) {
        log(level: .warning, message(), metadata: metadata())
    }
    public func error(_ message: @autoclosure () -> Message, metadata: @autoclosure () -> Metadata? = nil) {
        log(level: .error, message(), metadata: metadata())
    }
    public func critical(_ message: @autoclosure () -> Message, metadata: @autoclosure () -> Metadata? = nil) {
        log(level: .critical, message(), metadata: metadata())
    }
}

/// One log event, as handed to a `LogHandler`.
public struct LogRecord: Sendable {
    public let date: Date
    public let level: Logger.Level
    public let label: String
    public let message: String
    public let metadata: [String: String]

    public init(date: Date, level: Logger.Level, label: String, message: String, metadata: [String: String]) {
        self.date = date
        self.level = level
        self.label = label
        self.message = message
        self.metadata = metadata
    }
}

/// Where log records go. The default writes one line per record to stderr.
public protocol LogHandler: Sendable {
    func emit(_ record: LogRecord)
}

/// Process-wide logging settings: the threshold and the handler.
public final class LoggingSystem: Sendable {
    public static let shared = LoggingSystem()

    private struct State {
        var level: Logger.Level = .info
        var handler: any LogHandler = StderrLogHandler(format: .text)
    }
    private let state = Mutex(State())

    public var level: Logger.Level { state.withLock { $0.level } }
    public var handler: any LogHandler { state.withLock { $0.handler } }

    /// Changes the threshold alone (SIGHUP's `log.level`).
    public func setLevel(_ level: Logger.Level) {
        state.withLock { $0.level = level }
    }

    public func configure(level: Logger.Level, handler: any LogHandler) {
        state.withLock {
            $0.level = level
            $0.handler = handler
        }
    }
}
