import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization
import Syscall
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP endpoint (`http.bind`, PROTOCOL.md §9 and §10): a small HTTP/1.1
/// server on a thread of its own (`http`) that answers through `route`
/// (`OperationsRoutes`: the metrics, health, the live page and its picture).
///
/// Each connection gets one request and one response, then is closed, but
/// for an event stream (`HTTPResponse.streams`), which stays open and gets
/// every event `publish` hands over, and a comment line every 15 s. A
/// request head over 8 KiB, or one slower than 5 s to arrive, is closed
/// without an answer; a stream client that falls more than 1 MiB behind is
/// closed (its browser reconnects). Answers are made by `route` on the
/// cooperative pool and handed back through a mailbox, so a slow answer
/// never holds the thread, and nothing here ever waits for a socket loop or the store.
public final class HTTPEndpoint: Service {
    public struct Configuration: Sendable {
        /// `host:port` (`http.bind`); port 0 lets the system choose.
        public var bind: String = "127.0.0.1:5558"
        /// How long a request may take to arrive.
        public var requestTimeout: Duration = .seconds(5)
        /// At most this many connections at once (event streams included); more wait in the backlog.
        public var maxConnections = 512

        public init() {}
    }

    /// Answers a request (method, path).
    public typealias Route = @Sendable (String, String) async -> HTTPResponse

    public let name = "http"
    private let configuration: Configuration
    private let route: Route
    private let mailbox: Mailbox<Delivery>
    private let stopping = Atomic<Bool>(false)
    private let bound = Mutex<String?>(nil)
    /// Triggered when the thread has closed its sockets.
    private let finished = ShutdownSignal()
    private let logger: Logger

    public init(configuration: Configuration, route: @escaping Route, logger: Logger = Logger(label: "http")) throws {
        self.logger = logger
        self.configuration = configuration
        self.route = route
        mailbox = try Mailbox()
    }

    /// What reaches the thread: an answer for a connection, or an event for every stream.
    enum Delivery: Sendable {
        case answer(Int32, [UInt8], streams: Bool)
        case event([UInt8])
    }

    /// Hands `event` (a server-sent event, `HTTPResponse.event`) to every
    /// open event stream; never blocks.
    public func publish(event: String) {
        mailbox.post(.event(Array(event.utf8)))
    }

    /// `publish(event:)` of bytes made already (`HTTPResponse.event(_:json:)`).
    public func publish(event: [UInt8]) {
        mailbox.post(.event(event))
    }

    /// Whether any event stream is open: with none, a publisher need not
    /// even encode its event.
    public var hasEventStreams: Bool { streams.load(ordering: .relaxed) > 0 }
    private let streams = Atomic<Int>(0)

    /// The address really bound, `host:port`.
    public var boundAddress: String? { bound.withLock { $0 } }

    /// Binds and starts the thread.
    ///
    /// - Throws: `SystemCallError` naming `bind` and the address when it is taken or invalid.
    public func start() async throws {
        let listener = try TCPListener.listen(on: configuration.bind)
        recordBoundAddress(listener)  // before start returns: endpoints.json and the log read it
        let thread = Thread { [self] in
            Thread.current.name = "http"
            serve(listener)
            Syscall.close(listener)
            finished.trigger()
        }
        thread.start()
        logger.info("http endpoint listening", metadata: ["address": "\(boundAddress ?? configuration.bind)"])
    }

    public func run() async throws {
        await gracefulShutdown()
        stopping.store(true, ordering: .sequentiallyConsistent)
        mailbox.wake()
        await finished.wait()
    }

    struct Client {
        var buffer: [UInt8] = []
        var deadline: ContinuousClock.Instant
        var answering = false
        var output: [UInt8] = []
        var written = 0
        /// An event stream: kept open once its output is sent.
        var streaming = false
    }

    /// A stream client further behind than this is closed.
    static let streamBacklogLimit = 1 << 20
    static let keepAliveInterval: Duration = .seconds(15)

    /// The thread's loop: poll the listener, the mailbox and the clients.
    private func serve(_ listener: Int32) {
        var clients: [Int32: Client] = [:]
        var nextKeepAlive = ContinuousClock.now + Self.keepAliveInterval
        while !stopping.load(ordering: .sequentiallyConsistent) {
            var fds = [
                pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                pollfd(fd: mailbox.fd, events: Int16(POLLIN), revents: 0),
            ]
            for (fd, client) in clients {
                fds.append(pollfd(fd: fd, events: Int16(client.output.isEmpty ? POLLIN : POLLOUT), revents: 0))
            }
            let ready = (try? Syscall.call("poll") { poll(&fds, nfds_t(fds.count), 200) }) ?? 0
            let now = ContinuousClock.now
            if ready > 0 {
                if fds[0].revents != 0 && clients.count < configuration.maxConnections {
                    accept(listener, into: &clients, now: now)
                }
                if fds[1].revents != 0 {
                    for delivery in mailbox.drain() {
                        switch delivery {
                        case .answer(let fd, let bytes, let streams) where clients[fd] != nil:
                            clients[fd]!.output = bytes
                            clients[fd]!.written = 0
                            clients[fd]!.streaming = streams
                            if streams { self.streams.add(1, ordering: .relaxed) }
                        case .answer: break  // the client left meanwhile
                        case .event(let bytes): send(bytes, toStreams: &clients)
                        }
                    }
                }
                for item in fds.dropFirst(2) where item.revents != 0 {
                    guard var client = clients[item.fd] else { continue }
                    if client.output.isEmpty {
                        guard read(item.fd, into: &client) else {
                            close(item.fd, &clients)
                            continue
                        }
                        clients[item.fd] = client
                    } else {
                        switch write(item.fd, from: &client) {
                        case .pending: break
                        case .gone:
                            close(item.fd, &clients)
                            continue
                        case .done:
                            guard client.streaming else {
                                close(item.fd, &clients)
                                continue
                            }
                            client.output = []
                            client.written = 0
                        }
                        clients[item.fd] = client
                    }
                }
            }
            if now >= nextKeepAlive {
                send(Array(": keep-alive\n\n".utf8), toStreams: &clients)
                nextKeepAlive = now + Self.keepAliveInterval
            }
            // Too slow to send its request: closed without an answer.
            for (fd, client) in clients where !client.answering && now >= client.deadline { close(fd, &clients) }
        }
        for fd in clients.keys { Syscall.close(fd) }
    }

    private func recordBoundAddress(_ listener: Int32) {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) == 0 }
        }
        guard ok else { return }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count))
        let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        bound.withLock { $0 = "\(host):\(UInt16(bigEndian: address.sin_port))" }
    }

    private func accept(_ listener: Int32, into clients: inout [Int32: Client], now: ContinuousClock.Instant) {
        while true {
            let accepted = try? Syscall.nonBlocking("accept", "http") { Glibc.accept(listener, nil, nil) }
            guard let fd = accepted else { return }
            do {
                try Syscall.addStatusFlags(fd, O_NONBLOCK)
                try Syscall.call("fcntl(F_SETFD)") { fcntl(fd, F_SETFD, FD_CLOEXEC) }
                // An event's last segment goes out at once, not after the
                // peer's delayed acknowledgement of the one before (Nagle).
                var one: Int32 = 1
                try Syscall.call("setsockopt", "TCP_NODELAY") {
                    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                }
            } catch {
                Syscall.close(fd)
                continue
            }
            clients[fd] = Client(deadline: now + configuration.requestTimeout)
        }
    }

    /// Reads what arrived; false to close the connection.
    private func read(_ fd: Int32, into client: inout Client) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let got: Int?
        do {
            got = try Syscall.nonBlocking("read", "http client") { Glibc.read(fd, &chunk, chunk.count) }
        } catch {
            return false  // the client is gone
        }
        guard let n = got else { return true }  // nothing yet
        guard n > 0 else { return false }  // closed by the client
        guard !client.answering else { return true }  // one request per connection
        client.buffer += chunk[..<n]
        switch HTTPRequestHead.parse(client.buffer) {
        case .incomplete: return true
        case .tooLarge: return false
        case .malformed:
            client.answering = true
            client.output = HTTPResponse(status: 400, body: "not an HTTP request\n").bytes
            return true
        case .request(let method, let path):
            client.answering = true
            let mailbox = self.mailbox
            let route = self.route
            Task {
                let response: HTTPResponse =
                    method == "GET" || method == "HEAD"
                    ? await route(method, path) : HTTPResponse(status: 405, body: "only GET\n")
                mailbox.post(.answer(fd, response.bytes, streams: response.streams))
            }
            return true
        }
    }

    enum WriteOutcome {
        case pending, done, gone
    }

    /// Writes what it can.
    private func write(_ fd: Int32, from client: inout Client) -> WriteOutcome {
        let remaining = client.output.count - client.written
        let written = client.written
        let outcome = client.output.withUnsafeBytes { buffer in
            Result { () throws(SystemCallError) in
                try Syscall.nonBlocking("write", "http client") { Glibc.write(fd, buffer.baseAddress! + written, remaining) }
            }
        }
        guard case .success(let result) = outcome else { return .gone }
        guard let n = result else { return .pending }  // would block: try again when writable
        client.written += n
        return client.written < client.output.count ? .pending : .done
    }

    /// Appends `bytes` to every open event stream, and writes at once what
    /// the socket takes (the publish delay is the service's, not the next poll's).
    private func send(_ bytes: [UInt8], toStreams clients: inout [Int32: Client]) {
        for fd in Array(clients.keys) where clients[fd]!.streaming {
            var client = clients[fd]!
            if client.written == client.output.count {
                client.output = bytes  // shared with every other stream, not copied
                client.written = 0
            } else {
                client.output += bytes
            }
            guard client.output.count - client.written <= Self.streamBacklogLimit, write(fd, from: &client) != .gone else {
                close(fd, &clients)
                continue
            }
            clients[fd] = client
        }
    }

    private func close(_ fd: Int32, _ clients: inout [Int32: Client]) {
        if clients[fd]?.streaming == true { streams.subtract(1, ordering: .relaxed) }
        clients[fd] = nil
        Syscall.close(fd)
    }
}
