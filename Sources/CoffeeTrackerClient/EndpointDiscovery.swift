import CoffeeDomain
import Foundation
import Syscall
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Where a service is, as its configuration says: its data folder (where a
/// running service writes `endpoints.json`) and its configured binds.
public struct ServiceLocation: Sendable, Equatable {
    public var dataDirectory: String
    public var query: String
    public var updates: String
    public var ingest: String

    public init(
        dataDirectory: String, query: String = "tcp://127.0.0.1:5557", updates: String = "tcp://127.0.0.1:5556",
        ingest: String = "tcp://127.0.0.1:5555"
    ) {
        self.dataDirectory = dataDirectory
        self.query = query
        self.updates = updates
        self.ingest = ingest
    }

    public var endpointsPath: String { (dataDirectory as NSString).appendingPathComponent("endpoints.json") }

    /// Reads what a client needs of a service's configuration file (docs/protocol.md
    /// §7): `dataDirectory` (relative to the file's folder) and the first bind
    /// of each endpoint; the rest of the file is the service's business.
    ///
    /// - Throws: `QueryClient.Failure` naming the file when it cannot be read.
    public init(configurationFile path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw QueryClient.Failure(description: "cannot read \(path)")
        }
        let file: JSONValue
        do {
            file = try JSONReader.parse(data)
        } catch {
            throw QueryClient.Failure(description: "\(path) is not valid JSON: \(error)")
        }
        let folder = (path as NSString).deletingLastPathComponent
        func first(_ section: String) -> String? {
            (try? file.optionalMember(section)?.optionalMember("bind")?.items().first?.text()) ?? nil
        }
        let dataFolder = (try? file.optionalMember("dataDirectory")?.text()) ?? "data"
        let defaults = ServiceLocation(dataDirectory: "")
        self.init(
            dataDirectory: dataFolder.hasPrefix("/") ? dataFolder : (folder as NSString).appendingPathComponent(dataFolder),
            query: first("query") ?? defaults.query, updates: first("updates") ?? defaults.updates,
            ingest: first("ingest") ?? defaults.ingest)
    }
}

/// Where a client finds the service: `endpoints.json` in the data folder
/// when the service wrote one, else the configured binds.
public enum EndpointDiscovery {
    /// An endpoint written without its scheme: bad usage (exit 2, docs/protocol.md §8).
    public struct SchemeMissing: Error, CustomStringConvertible {
        public let description: String
    }

    /// A client-side endpoint needs its scheme; say which form is meant.
    ///
    /// - Throws: `SchemeMissing` showing the right form.
    public static func checkScheme(_ endpoint: String) throws(SchemeMissing) {
        guard !["tcp://", "ipc://", "inproc://"].contains(where: { endpoint.hasPrefix($0) }) else { return }
        let form = endpoint.contains(":") ? "tcp://\(endpoint)" : "ipc://\(endpoint)"
        throw SchemeMissing(
            description: "endpoint \"\(endpoint)\" needs a scheme: \(form) (tcp://HOST:PORT, or ipc:///path/to/socket)")
    }

    /// The endpoints the running service wrote to `endpoints.json`, checked
    /// for a service that is gone: when the pid it names is not running,
    /// clients fail at once instead of waiting out their timeout.
    ///
    /// - Throws: `QueryClient.Failure` naming the pid and the file.
    /// Whether no process `pid` exists (kill with signal 0 says ESRCH); one of another user's counts as running.
    static func hasExited(_ pid: Int32) -> Bool {
        do {
            try Syscall.call("kill", "pid \(pid)") { kill(pid, 0) }
            return false
        } catch {
            return error.errno == ESRCH
        }
    }

    public static func running(_ configuration: ServiceLocation) throws -> (query: String, updates: String, ingest: String) {
        if let data = FileManager.default.contents(atPath: configuration.endpointsPath),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let pid = (json["pid"] as? NSNumber)?.int32Value, pid > 0, Self.hasExited(pid)
        {
            throw QueryClient.Failure(
                description:
                    "the service is not running: \(configuration.endpointsPath) names pid \(pid), which has exited; start it with `coffee-tracker serve`"
            )
        }
        return endpoints(configuration)
    }

    /// The service's public key from `endpoints.json` (nil for plaintext, or no file).
    public static func serverKey(_ configuration: ServiceLocation) -> String? {
        guard let data = FileManager.default.contents(atPath: configuration.endpointsPath),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return json["serverKey"] as? String
    }

    public static func endpoints(_ configuration: ServiceLocation) -> (query: String, updates: String, ingest: String) {
        var query = configuration.query
        var updates = configuration.updates
        var ingest = configuration.ingest
        if let data = FileManager.default.contents(atPath: configuration.endpointsPath),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        {
            if let q = (json["query"] as? [String])?.first { query = q }
            if let u = (json["updates"] as? [String])?.first { updates = u }
            if let i = (json["ingest"] as? [String])?.first { ingest = i }
        }
        return (connectable(query), connectable(updates), connectable(ingest))
    }

    /// A bind address as a client connects to it: `*` and 0.0.0.0 become loopback.
    public static func connectable(_ endpoint: String) -> String {
        endpoint.replacingOccurrences(of: "tcp://*:", with: "tcp://127.0.0.1:")
            .replacingOccurrences(of: "tcp://0.0.0.0:", with: "tcp://127.0.0.1:")
    }
}
