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
    /// Asked while a reply is awaited (every 100 ms): true gives up at once
    /// (a follower's loop that is stopping, say, so that a drain does not
    /// wait out the timeout of a request to a primary that died).
    public var interrupted: (() -> Bool)?

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
        let body = try exchange(request)
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw Failure(description: "the service at \(endpoint) sent a reply that is not a JSON object")
        }
        return object
    }

    /// Sends `request` and returns the reply's bytes.
    ///
    /// - Throws: `Failure` when nothing answers within the timeout.
    func exchange(_ request: JSONValue) throws -> Data {
        try socket.send([Data(), request.data()])
        let items = [ZMQSocket.PollItem.socket(socket)]
        var ready: [Bool]
        if let interrupted {
            let deadline = timeoutMs < 0 ? nil : ContinuousClock.now + .milliseconds(Int64(timeoutMs))
            repeat {
                ready = try ZMQSocket.poll(items, timeoutMs: 100)
                if interrupted() { throw Failure(description: "stopped while waiting for \(endpoint)") }
            } while ready.first != true && deadline.map { ContinuousClock.now < $0 } ?? true
        } else {
            ready = try ZMQSocket.poll(items, timeoutMs: Int(timeoutMs))  // -1: for ever
        }
        guard ready.first == true, let frames = try socket.receive(dontWait: true), let body = frames.last else {
            throw Failure(
                description:
                    "no answer from the service at \(endpoint) within \(Double(timeoutMs) / 1000) s; is `coffee-tracker serve` running?"
            )
        }
        return Data(body)
    }
}
