import CHTTPServer
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP endpoint (`http.bind`, docs/protocol.md §9, §10 and §12):
/// libmicrohttpd's HTTP/1.1 (keep-alive, its parser) on a thread of its own,
/// with TLS through GnuTLS under `http.tls`, and the strict rules of §12 that
/// the library's version lets through checked in `CHTTPServer` before
/// anything is answered.
///
/// A request is read whole (head and body, up to `maxBodyBytes`), then
/// answered through `route` on the cooperative pool while its connection
/// waits, suspended; so a slow answer never holds the server's thread. An
/// event stream (`HTTPResponse.streams`) stays open and gets every event
/// `publish` hands over, and a comment line every 15 s; one that falls more
/// than 1 MiB behind is ended (its browser reconnects).
public final class HTTPEndpoint: Service {
    public struct Configuration: Sendable {
        /// `host:port` (`http.bind`); port 0 lets the system choose.
        public var bind: String = "127.0.0.1:5558"
        /// How long a request's head may take to arrive.
        public var requestTimeout: Duration = .seconds(5)
        /// How long a keep-alive connection may stay idle.
        public var idleTimeout: Duration = .seconds(60)
        /// At most this many connections at once (event streams included); more are closed at once.
        public var maxConnections = 1024
        /// A request's head: at most this many bytes, and header lines.
        public var maxHeadBytes = 8192
        public var maxHeadLines = 100
        /// A request's body (`limits.maxMessageBytes`); more is refused 413.
        public var maxBodyBytes = 1 << 20
        /// `http.tls`: HTTPS with these PEM files.
        public var tls: TLSFiles?

        public init() {}
    }

    /// Answers a request.
    public typealias Route = @Sendable (HTTPRequest) async -> HTTPResponse

    public let name = "http"
    private let configuration: Configuration
    private let context: ServerContext
    private let server = Mutex<ServerPointer?>(nil)
    private let bound = Mutex<String?>(nil)
    private let logger: Logger

    public init(configuration: Configuration, logger: Logger, route: @escaping Route) throws {
        self.logger = logger
        self.configuration = configuration
        context = ServerContext(route: route, logger: logger)
    }

    /// Hands `event` (a server-sent event, `HTTPResponse.event`) to every
    /// open event stream; never blocks.
    public func publish(event: String) { publish(event: Array(event.utf8)) }

    /// `publish(event:)` of bytes made already (`HTTPResponse.event(_:json:)`).
    public func publish(event: [UInt8]) {
        server.withLock { pointer in
            guard let pointer else { return }
            event.withUnsafeBufferPointer { cth_server_broadcast(pointer.value, $0.baseAddress, $0.count) }
        }
    }

    /// Whether any event stream is open: with none, a publisher need not
    /// even encode its event.
    public var hasEventStreams: Bool { server.withLock { $0.map { cth_server_streams($0.value) > 0 } ?? false } }

    /// The address really bound, `host:port`.
    public var boundAddress: String? { bound.withLock { $0 } }

    /// Binds and starts the server's thread.
    ///
    /// - Throws: `SystemCallError` naming `bind` and the address when it is
    ///   taken or invalid; `TLSFiles.Refusal` for a certificate or key that
    ///   cannot be used.
    public func start() async throws {
        if let tls = configuration.tls { try tls.install() }
        let listener = try TCPListener.listen(on: configuration.bind)
        bound.withLock { $0 = TCPListener.address(of: listener) }  // before start returns: endpoints.json and the log read it
        var config = cth_config()
        config.listen_fd = listener
        config.max_connections = UInt32(configuration.maxConnections)
        config.idle_timeout_s = UInt32(max(1, configuration.idleTimeout.components.seconds))
        config.head_timeout_ms = UInt32(
            configuration.requestTimeout.components.seconds * 1000 + configuration.requestTimeout.components.attoseconds
                / 1_000_000_000_000_000)
        config.max_head_bytes = configuration.maxHeadBytes
        config.max_head_lines = UInt32(configuration.maxHeadLines)
        config.max_body_bytes = configuration.maxBodyBytes
        config.max_stream_backlog = 1 << 20
        config.tls = configuration.tls == nil ? 0 : 1
        var error = [CChar](repeating: 0, count: 256)
        let opaque = Unmanaged.passUnretained(context).toOpaque()
        guard let started = cth_server_start(&config, onRequest, onLog, opaque, &error, error.count) else {
            Syscall.close(listener)
            throw SystemCallError(call: "MHD_start_daemon", detail: cText(error), errno: EINVAL)
        }
        server.withLock { $0 = ServerPointer(value: started) }
        logger.info(
            "http endpoint listening",
            metadata: [
                "address": "\(boundAddress ?? configuration.bind)", "tls": "\(configuration.tls != nil)",
            ])
    }

    public func run() async throws {
        await gracefulShutdown()
        guard let pointer = server.withLock({ $0.take() }) else { return }
        // Waiting answers get 503, streams end, connections close: a short wait for the library's thread.
        cth_server_stop(pointer.value)
    }

    /// SIGHUP: the certificate and key read again; a pair that cannot be used keeps the old one, saying why.
    public func reloadCertificate() {
        guard let tls = configuration.tls else { return }
        do {
            try tls.install()
            logger.notice("reloaded the TLS certificate", metadata: ["certificate": "\(tls.certificateFile)"])
        } catch {
            logger.error("could not reload the TLS certificate; serving the old one", metadata: ["error": "\(error)"])
        }
    }
}

/// The C server, handed between threads only under its `Mutex`.
struct ServerPointer: @unchecked Sendable {
    let value: OpaquePointer
}

/// One request waiting for its answer; answered exactly once.
struct PendingExchange: @unchecked Sendable {
    let value: OpaquePointer

    func respond(_ response: HTTPResponse, logger: Logger) async {
        if let stream = response.bodyStream {
            await respond(response, streaming: stream, logger: logger)
            return
        }
        let body = response.bytes
        body.withUnsafeBufferPointer {
            cth_respond(
                value, UInt32(response.status), response.headerLines, $0.baseAddress, $0.count, response.streams ? 1 : 0, 0)
        }
    }
}

extension PendingExchange {
    /// The head now, then the body as `stream` writes it; the exchange is
    /// the writer's until `cth_body_end`, however early the client goes.
    private func respond(_ response: HTTPResponse, streaming stream: HTTPBodyStream, logger: Logger) async {
        let signal = BodyWriterSignal()
        let told = Unmanaged.passRetained(signal)  // the C server's, until the body ends
        cth_respond_body(value, UInt32(response.status), response.headerLines, onMore, told.toOpaque())
        let exchange = self
        var failed = false
        do {
            try await stream.produce { piece in
                let written = piece.withUnsafeBufferPointer { cth_body_write(exchange.value, $0.baseAddress, $0.count) }
                if written == 1 { await signal.wait() }
                return written >= 0
            }
        } catch {
            failed = true
            logger.error("a streamed body was cut short", metadata: ["error": "\(error)"])
        }
        cth_body_end(value, failed ? 1 : 0)
        told.release()
    }
}

private func onMore(_ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<BodyWriterSignal>.fromOpaque(context).takeUnretainedValue().tell()
}

/// What the C server's callbacks reach: the route and the logger.
final class ServerContext: Sendable {
    let route: HTTPEndpoint.Route
    let logger: Logger

    init(route: @escaping HTTPEndpoint.Route, logger: Logger) {
        self.route = route
        self.logger = logger
    }

    /// On the server's thread: the request copied out, then answered on the pool.
    func received(_ exchange: OpaquePointer) {
        var headers: [String: String] = [:]
        for name in HTTPRequest.readFields {
            if let value = cth_request_header(exchange, name) { headers[name] = String(cString: value) }
        }
        var length = 0
        let bytes = cth_request_body(exchange, &length)
        let body = bytes.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
        let request = HTTPRequest(
            method: String(cString: cth_request_method(exchange)), target: String(cString: cth_request_target(exchange)),
            headers: headers, body: body, peer: String(cString: cth_request_peer(exchange)))
        let pending = PendingExchange(value: exchange)
        let route = self.route
        let logger = self.logger
        Task { await pending.respond(await route(request), logger: logger) }
    }
}

private func onRequest(_ context: UnsafeMutableRawPointer?, _ exchange: OpaquePointer?) {
    guard let context, let exchange else { return }
    Unmanaged<ServerContext>.fromOpaque(context).takeUnretainedValue().received(exchange)
}

private func onLog(_ context: UnsafeMutableRawPointer?, _ message: UnsafePointer<CChar>?) {
    guard let context, let message else { return }
    Unmanaged<ServerContext>.fromOpaque(context).takeUnretainedValue().logger.info(
        "http server", metadata: ["detail": "\(String(cString: message))"])
}
