import CoffeeDomain
import Foundation
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking client of the query endpoint, for the command line and tests.
///
/// - Important: blocks its thread for up to `timeout`; not for use on the
///   cooperative pool of a long-running program.
public final class QueryClient {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    private let context = ZMQContext()
    private let socket: ZMQSocket
    public let endpoint: String
    private let timeoutMs: Int32

    /// - Parameter curve: the CURVE client settings when the service runs
    ///   with `security.curve`; nil for plaintext.
    /// - Parameter timeout: seconds to wait for each answer; 0 waits for ever.
    public init(endpoint: String, timeout: TimeInterval = 5, curve: ClientCurve? = nil) throws {
        try EndpointDiscovery.checkScheme(endpoint)
        self.endpoint = endpoint
        timeoutMs = timeout <= 0 ? -1 : Int32(timeout * 1000)
        socket = try ZMQSocket(context, .dealer)
        try socket.setLinger(ms: 0)
        try socket.secure(curve)
        try socket.connect(endpoint)
    }

    deinit { socket.close() }

    /// Sends `request`; returns the reply when it is `{"ok": true, ...}`.
    ///
    /// - Throws: `Failure` for an error reply ("code: message"), silence or junk.
    public func ok(_ request: JSONValue) throws -> [String: Any] {
        try Self.checked(try call(request))
    }

    /// `reply` when it is `{"ok": true, ...}`; else a `Failure` saying "code: message".
    public static func checked(_ reply: [String: Any]) throws -> [String: Any] {
        guard reply["ok"] as? Bool == true else {
            let error = reply["error"] as? [String: Any] ?? [:]
            throw Failure(description: "\(error["code"] ?? "error"): \(error["message"] ?? "no message")")
        }
        return reply
    }

    /// Sends `request` and returns the reply object.
    ///
    /// - Throws: `Failure` when nothing answers within the timeout or the reply is not JSON.
    public func call(_ request: JSONValue) throws -> [String: Any] {
        try socket.send([Data(), request.data()])
        let items = [ZMQSocket.PollItem.socket(socket)]
        let ready = try ZMQSocket.poll(items, timeoutMs: Int(timeoutMs))  // -1: for ever
        guard ready.first == true, let frames = try socket.receive(dontWait: true), let body = frames.last else {
            throw Failure(
                description:
                    "no answer from the service at \(endpoint) within \(Double(timeoutMs) / 1000) s; is `coffee-tracker serve` running?"
            )
        }
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw Failure(description: "the service at \(endpoint) sent a reply that is not a JSON object")
        }
        return object
    }
}

/// A client's CURVE settings: the service's public key and the client's own pair.
public struct ClientCurve: Sendable {
    public var serverKey: String
    public var keys: CurveKeyPair

    public init(serverKey: String, keys: CurveKeyPair) {
        self.serverKey = serverKey
        self.keys = keys
    }

    /// What a command's `--key` and `--server-key` (or the key the service
    /// published in `endpoints.json`) come to: nil for plaintext.
    ///
    /// - Throws: `QueryClient.Failure` for a key file that cannot be used,
    ///   a server key that is not one, or a CURVE service without `--key`.
    public static func from(keyFile: String?, serverKey: String?, discovered: String?) throws -> ClientCurve? {
        guard let keyFile else {
            if let key = serverKey ?? discovered {
                throw QueryClient.Failure(
                    description:
                        "the service requires CURVE (its key is \(key.prefix(8))…): pass --key NAME.key_secret, a certificate from `coffee-tracker keygen NAME` whose NAME.key is in the service's clients directory"
                )
            }
            return nil
        }
        let certificate: CurveCertificate
        do {
            certificate = try CurveCertificate.load(path: keyFile)
        } catch {
            throw QueryClient.Failure(description: "--key: \(error)")
        }
        guard let secret = certificate.secretKey, let keys = CurveKeyPair(secretKey: secret) else {
            throw QueryClient.Failure(description: "--key \(keyFile) holds no secret-key: name the .key_secret file")
        }
        guard let server = serverKey ?? discovered else {
            throw QueryClient.Failure(
                description: "--key needs the service's public key: --server-key KEY, or --config to read it from endpoints.json")
        }
        guard CurveKeyPair.isKey(server) else {
            throw QueryClient.Failure(description: "--server-key must be a 40-character Z85 public key, got \"\(server)\"")
        }
        return ClientCurve(serverKey: server, keys: keys)
    }
}

extension ZMQSocket {
    /// Makes the socket a CURVE client when `curve` is set; before connecting.
    public func secure(_ curve: ClientCurve?) throws(ZMQError) {
        guard let curve else { return }
        try setCurveClient(serverKey: curve.serverKey, publicKey: curve.keys.publicKey, secretKey: curve.keys.secretKey)
    }
}

/// Where a client finds the service: `endpoints.json` in the data folder
/// when the service wrote one, else the configured binds.
public enum EndpointDiscovery {
    /// An endpoint written without its scheme: bad usage (exit 2, PROTOCOL.md §8).
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
    public static func running(_ configuration: ServiceConfiguration) throws -> (query: String, updates: String, ingest: String) {
        if let data = FileManager.default.contents(atPath: configuration.endpointsPath),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let pid = (json["pid"] as? NSNumber)?.int32Value, pid > 0, kill(pid, 0) != 0, errno == ESRCH
        {
            throw QueryClient.Failure(
                description:
                    "the service is not running: \(configuration.endpointsPath) names pid \(pid), which has exited; start it with `coffee-tracker serve`"
            )
        }
        return endpoints(configuration)
    }

    /// The service's public key from `endpoints.json` (nil for plaintext, or no file).
    public static func serverKey(_ configuration: ServiceConfiguration) -> String? {
        guard let data = FileManager.default.contents(atPath: configuration.endpointsPath),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return json["serverKey"] as? String
    }

    public static func endpoints(_ configuration: ServiceConfiguration) -> (query: String, updates: String, ingest: String) {
        var query = configuration.query.bind.first ?? "tcp://127.0.0.1:5557"
        var updates = configuration.updates.bind.first ?? "tcp://127.0.0.1:5556"
        var ingest = configuration.ingest.bind.first ?? "tcp://127.0.0.1:5555"
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
