import CoffeeDomain
import CoffeeLogging
import Foundation
import ZeroMQ

/// Reads the JSON configuration file strictly: an unknown key, a wrong type
/// or an impossible value stops start-up with a message naming the key.
public enum ConfigurationLoader {
    /// Loads `path`. Relative paths inside it are resolved against its folder.
    public static func load(path: String) throws -> ServiceConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigurationError(message: "\(path): cannot read the configuration file (\(error.localizedDescription))")
        }
        let folder = (URL(fileURLWithPath: path).deletingLastPathComponent().path)
        return try parse(data, file: path, relativeTo: folder)
    }

    /// The embedded defaults, with paths relative to `folder`.
    public static func defaults(relativeTo folder: String) -> ServiceConfiguration {
        var c = ServiceConfiguration()
        c.dataDirectory = resolve(c.dataDirectory, folder)
        c.inboxDirectory = resolve(c.inboxDirectory, folder)
        return c
    }

    public static func parse(_ data: Data, file: String, relativeTo folder: String) throws -> ServiceConfiguration {
        // The same strict reader as the bus, the inbox and the query
        // endpoint: a trailing comma is not JSON here either.
        let root: JSONValue
        do throws(JSONReader.SyntaxError) {
            root = try JSONReader.parse(data, duplicateKeys: .keep)  // its own error names the key's path
        } catch {
            let (line, column) = position(of: error.offset, in: data)
            throw ConfigurationError(message: "\(file):\(line):\(column): not valid JSON (\(error.message))")
        }
        let reader = Reader(file: file)
        guard case .object(let top) = root else { throw reader.fail("", "must be a JSON object") }
        var c = ServiceConfiguration()
        c.dataDirectory = "../data"
        c.inboxDirectory = "../inbox"
        try reader.keys(top, "", allowed: ServiceConfiguration.keys(of: ""))
        if let v = try reader.string(top, "dataDirectory") { c.dataDirectory = v }
        if let v = try reader.string(top, "inboxDirectory") { c.inboxDirectory = v }
        c.dataDirectory = resolve(c.dataDirectory, folder)
        c.inboxDirectory = resolve(c.inboxDirectory, folder)

        if let s = try reader.section(top, "inbox", allowed: ServiceConfiguration.keys(of: "inbox")) {
            if let v = try reader.number(s, "inbox.sweepIntervalS", above: 0) { c.inbox.sweepIntervalS = v }
        }
        if let s = try reader.section(top, "ingest", allowed: ServiceConfiguration.keys(of: "ingest")) {
            if let v = try reader.endpoints(s, "ingest.bind") { c.ingest.bind = v.map { resolveIPC($0, folder) } }
            if let v = try reader.connectEntries(s, "ingest.connect") {
                c.ingest.connect = v.map { .init(endpoint: resolveIPC($0.endpoint, folder), serverKey: $0.serverKey) }
            }
            if let v = try reader.int(s, "ingest.receiveHighWaterMark", min: 0) { c.ingest.receiveHighWaterMark = v }
        }
        if let s = try reader.section(top, "updates", allowed: ServiceConfiguration.keys(of: "updates")) {
            if let v = try reader.endpoints(s, "updates.bind") { c.updates.bind = v.map { resolveIPC($0, folder) } }
            if let v = try reader.int(s, "updates.sendHighWaterMark", min: 0) { c.updates.sendHighWaterMark = v }
        }
        if let s = try reader.section(top, "query", allowed: ServiceConfiguration.keys(of: "query")) {
            if let v = try reader.endpoints(s, "query.bind") { c.query.bind = v.map { resolveIPC($0, folder) } }
        }
        if let s = try reader.section(top, "http", allowed: ServiceConfiguration.keys(of: "http")) {
            c.http = try http(s, reader, folder)
        }
        if let s = try reader.section(top, "model", allowed: ServiceConfiguration.keys(of: "model")) {
            if let v = try reader.number(s, "model.halfLifeHours", above: 0, max: 48) { c.model.halfLifeHours = v }
            if let v = try reader.number(s, "model.sleepThresholdMg", above: 0, max: 1000) { c.model.sleepThresholdMg = v }
            if let v = try reader.number(s, "model.dailyLimitMg", above: 0, max: 100_000) { c.model.dailyLimitMg = v }
            if let v = try reader.string(s, "model.timeZone") {
                guard TimeZone(identifier: v) != nil else {
                    throw reader.fail("model.timeZone", "must be an IANA time zone name such as Europe/Berlin, got \"\(v)\"")
                }
                c.model.timeZone = v
            }
        }
        if let s = try reader.section(top, "publish", allowed: ServiceConfiguration.keys(of: "publish")) {
            if let v = try reader.int(s, "publish.modelIntervalMs", min: 1) { c.publish.modelIntervalMs = v }
            if let v = try reader.number(s, "publish.refreshIntervalS", above: 0) { c.publish.refreshIntervalS = v }
            if let v = try reader.number(s, "publish.heartbeatIntervalS", above: 0) { c.publish.heartbeatIntervalS = v }
        }
        if let s = try reader.section(top, "store", allowed: ServiceConfiguration.keys(of: "store")) {
            if let v = try reader.number(s, "store.tombstoneRetentionDays", above: 0) { c.store.tombstoneRetentionDays = v }
            if let v = try reader.string(s, "store.backupDirectory") { c.store.backupDirectory = resolve(v, folder) }
            if let pg = try reader.section(s, "store.postgresql", allowed: ServiceConfiguration.keys(of: "store.postgresql")) {
                guard let conninfo = try reader.string(pg, "store.postgresql.conninfo"), !conninfo.isEmpty else {
                    throw reader.fail(
                        "store.postgresql.conninfo",
                        "is required with store.postgresql: libpq's connection string, such as \"host=db.example dbname=coffee\"")
                }
                c.store.postgresql = conninfo
            }
        }
        if let s = try reader.section(top, "limits", allowed: ServiceConfiguration.keys(of: "limits")) {
            if let v = try reader.string(s, "limits.earliestDate") {
                guard let date = RFC3339.parse(v) else {
                    throw reader.fail(
                        "limits.earliestDate", "must be an RFC 3339 date with a zone (2000-01-01T00:00:00Z), got \"\(v)\"")
                }
                c.limits.earliestDate = date
            }
            if let v = try reader.number(s, "limits.maxMgCaffeine", above: 0) { c.limits.maxMgCaffeine = v }
            if let v = try reader.number(s, "limits.maxFutureSkewS", above: -1) { c.limits.maxFutureSkewS = v }
            if let v = try reader.int(s, "limits.maxMessageBytes", min: 64) { c.limits.maxMessageBytes = v }
            if let v = try reader.int(s, "limits.maxFileBytes", min: 1) { c.limits.maxFileBytes = v }
            if let v = try reader.int(s, "limits.maxExportBytes", min: 1) { c.limits.maxExportBytes = v }
        }
        if let s = try reader.section(top, "log", allowed: ServiceConfiguration.keys(of: "log")) {
            if let v = try reader.string(s, "log.level") {
                guard let level = Logger.Level(rawValue: v) else {
                    throw reader.fail(
                        "log.level",
                        "must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(v)\"")
                }
                c.log.level = level
            }
            if let v = try reader.string(s, "log.format") {
                guard let format = StderrLogHandler.Format(rawValue: v) else {
                    throw reader.fail("log.format", "must be text or json, got \"\(v)\"")
                }
                c.log.format = format
            }
        }
        if let s = try reader.section(top, "security", allowed: ServiceConfiguration.keys(of: "security")) {
            if let v = try reader.bool(s, "security.allowPlaintextRemote") { c.security.allowPlaintextRemote = v }
            if let v = try reader.string(s, "security.tokensDirectory") { c.security.tokensDirectory = resolve(v, folder) }
            if let curve = try reader.section(s, "security.curve", allowed: ["secretKeyFile", "clientsDirectory"]) {
                guard let secret = try reader.string(curve, "security.curve.secretKeyFile") else {
                    throw reader.fail("security.curve.secretKeyFile", "is required with security.curve")
                }
                guard let clients = try reader.string(curve, "security.curve.clientsDirectory") else {
                    throw reader.fail("security.curve.clientsDirectory", "is required with security.curve")
                }
                c.security.curve = .init(secretKeyFile: resolve(secret, folder), clientsDirectory: resolve(clients, folder))
            }
        }
        if let s = try reader.section(top, "follow", allowed: ServiceConfiguration.keys(of: "follow")) {
            c.follow = try follow(s, reader, folder)
            if c.store.postgresql != nil {
                throw reader.fail(
                    "follow",
                    "cannot be used with store.postgresql: a store in PostgreSQL is made redundant by PostgreSQL's own streaming replication"
                )
            }
        }
        if let s = try reader.section(top, "alerts", allowed: ServiceConfiguration.keys(of: "alerts")) {
            c.alerts = try alerts(s, reader, folder)
        }
        if let s = try reader.section(top, "mqtt", allowed: ServiceConfiguration.keys(of: "mqtt")) {
            c.mqtt = try mqtt(s, reader, folder)
        }
        return c
    }

    /// An `ipc://` endpoint with a relative path is relative to the
    /// configuration's folder, as the data and inbox paths are, so the same
    /// file works from any working folder.
    static func resolveIPC(_ endpoint: String, _ folder: String) -> String {
        guard endpoint.hasPrefix("ipc://") else { return endpoint }
        let path = String(endpoint.dropFirst("ipc://".count))
        return path.hasPrefix("/") || path.hasPrefix("@") ? endpoint : "ipc://" + resolve(path, folder)
    }

    static func resolve(_ path: String, _ folder: String) -> String {
        let joined = path.hasPrefix("/") ? path : (folder as NSString).appendingPathComponent(path)
        return (joined as NSString).standardizingPath
    }

    /// Line and column (both from 1, columns in bytes) of byte `offset`:
    /// people edit this file by hand.
    static func position(of offset: Int, in data: Data) -> (line: Int, column: Int) {
        let before = data.prefix(max(0, offset))
        let line = before.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        let lineStart = before.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? before.startIndex
        return (line, before.endIndex - lineStart + 1)
    }

    typealias Object = [(String, JSONValue)]

    /// Typed access to a JSON object, with errors that name the key.
    struct Reader {
        let file: String

        func fail(_ key: String, _ rule: String) -> ConfigurationError {
            ConfigurationError(message: key.isEmpty ? "\(file): \(rule)" : "\(file): \(key) \(rule)")
        }

        /// Refuses a key that is unknown here, or given twice.
        func keys(_ object: Object, _ prefix: String, allowed: Set<String>) throws {
            var seen: Set<String> = []
            for (key, _) in object {
                guard allowed.contains(key) else {
                    throw ConfigurationError(
                        message:
                            "\(file): unknown key \"\(prefix)\(key)\"; known keys here: \(allowed.sorted().joined(separator: ", "))"
                    )
                }
                guard seen.insert(key).inserted else { throw fail(prefix + key, "is given twice") }
            }
        }

        func section(_ object: Object, _ key: String, allowed: Set<String>) throws -> Object? {
            guard let raw = value(object, key) else { return nil }
            guard case .object(let s) = raw else { throw fail(key, "must be an object") }
            try keys(s, key + ".", allowed: allowed)
            return s
        }

        private func value(_ object: Object, _ path: String) -> JSONValue? {
            let leaf = String(path.split(separator: ".").last ?? "")
            return object.last { $0.0 == leaf }?.1
        }

        func string(_ object: Object, _ path: String) throws -> String? {
            guard let raw = value(object, path) else { return nil }
            guard case .string(let s) = raw else { throw fail(path, "must be a string") }
            guard !s.isEmpty else { throw fail(path, "must not be empty") }
            return s
        }

        func number(_ object: Object, _ path: String, above: Double, max: Double = .greatestFiniteMagnitude) throws
            -> Double?
        {
            let v: Double
            switch value(object, path) {
            case nil: return nil
            case .int(let n)?: v = Double(n)
            case .double(let d)?: v = d
            default: throw fail(path, "must be a number")
            }
            guard v.isFinite, v > above else { throw fail(path, "must be > \(formatNumber(above)), got \(formatNumber(v))") }
            guard v <= max else { throw fail(path, "must be <= \(formatNumber(max)), got \(formatNumber(v))") }
            return v
        }

        func int(_ object: Object, _ path: String, min: Int) throws -> Int? {
            guard let v = try number(object, path, above: -.greatestFiniteMagnitude) else { return nil }
            guard v == v.rounded(), abs(v) < 9e15 else { throw fail(path, "must be a whole number, got \(v)") }
            guard Int(v) >= min else { throw fail(path, "must be >= \(min), got \(Int(v))") }
            return Int(v)
        }

        func bool(_ object: Object, _ path: String) throws -> Bool? {
            guard let raw = value(object, path) else { return nil }
            guard case .bool(let b) = raw else { throw fail(path, "must be true or false") }
            return b
        }

        /// `ingest.connect`: endpoint strings, or `{"endpoint", "serverKey"}` objects.
        func connectEntries(_ object: Object, _ path: String) throws -> [ServiceConfiguration.ConnectEntry]? {
            guard let raw = value(object, path) else { return nil }
            guard case .array(let list) = raw else { throw fail(path, "must be an array of endpoints") }
            return try list.enumerated().map { (i, item) in
                let at = "\(path)[\(i)]"
                switch item {
                case .string(let s):
                    return .init(endpoint: try endpoint(s, at))
                case .object(let entry):
                    try keys(entry, at + ".", allowed: ["endpoint", "serverKey"])
                    guard let e = try string(entry, at + ".endpoint") else { throw fail(at + ".endpoint", "is required") }
                    let key = try string(entry, at + ".serverKey")
                    if let key, !CurveKeyPair.isKey(key) {
                        throw fail(at + ".serverKey", "must be a 40-character Z85 public key, got \"\(key)\"")
                    }
                    return .init(endpoint: try endpoint(e, at + ".endpoint"), serverKey: key)
                default:
                    throw fail(at, "must be an endpoint string or {\"endpoint\", \"serverKey\"}")
                }
            }
        }

        func endpoint(_ s: String, _ at: String) throws -> String {
            let schemes = ["tcp://", "ipc://", "inproc://"]
            guard schemes.contains(where: { s.hasPrefix($0) }), s.count > 6 else {
                throw fail(at, "must be a ZeroMQ endpoint (tcp://host:port, ipc://path), got \"\(s)\"")
            }
            return s
        }

        func endpoints(_ object: Object, _ path: String) throws -> [String]? {
            guard let raw = value(object, path) else { return nil }
            guard case .array(let list) = raw else { throw fail(path, "must be an array of endpoint strings") }
            return try list.enumerated().map { (i, item) in
                guard case .string(let s) = item else { throw fail("\(path)[\(i)]", "must be a string") }
                return try endpoint(s, "\(path)[\(i)]")
            }
        }
    }
}

func formatNumber(_ v: Double) -> String {
    v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
}
