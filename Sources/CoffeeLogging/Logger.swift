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

    public typealias Metadata = [String: String]

    public let label: String
    public var metadata: Metadata

    public init(label: String, metadata: Metadata = [:]) {
        self.label = label
        self.metadata = metadata
    }

    /// Logs `message` when `level` is at or above the system's threshold.
    ///
    /// The message is an autoclosure so that a filtered-out line costs nothing.
    public func log(
        _ level: Level, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> Metadata = [:]
    ) {
        let system = LoggingSystem.shared
        guard level >= system.level else { return }
        var merged = self.metadata
        for (key, value) in metadata() { merged[key] = value }
        system.handler.emit(
            LogRecord(date: Date(), level: level, label: label, message: message(), metadata: merged))
    }

    public func trace(_ m: @autoclosure () -> String, _ md: @autoclosure () -> Metadata = [:]) { log(.trace, m(), md()) }
    public func debug(_ m: @autoclosure () -> String, _ md: @autoclosure () -> Metadata = [:]) { log(.debug, m(), md()) }
    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> Metadata = [:]) { log(.info, m(), md()) }
    public func notice(_ m: @autoclosure () -> String, _ md: @autoclosure () -> Metadata = [:]) { log(.notice, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> Metadata = [:]) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> Metadata = [:]) { log(.error, m(), md()) }
    public func critical(_ m: @autoclosure () -> String, _ md: @autoclosure () -> Metadata = [:]) { log(.critical, m(), md()) }
}

/// One log event, as handed to a `LogHandler`.
public struct LogRecord: Sendable {
    public let date: Date
    public let level: Logger.Level
    public let label: String
    public let message: String
    public let metadata: Logger.Metadata

    public init(date: Date, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) {
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
