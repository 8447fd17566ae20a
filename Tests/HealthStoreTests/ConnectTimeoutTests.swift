import Foundation
import PostgreSQL
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A server that takes the TCP connection and never says a word: what a
/// database behind a network that drops packets looks like to libpq.
private final class SilentServer {
    let fd: Int32
    let port: UInt16

    init() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                precondition(bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0)
            }
        }
        self.fd = fd
        self.port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(fd) }
}

/// How long an attempt to connect took to fail; nil when it had not ended
/// after 20 s, or connected (the attempt is left to its thread: a blocked
/// libpq call cannot be interrupted, and the test must end).
private func failure(_ conninfo: String, connectTimeout: Int) -> Duration? {
    let ended = DispatchSemaphore(value: 0)
    let outcome = Mutex<Duration?>(nil)
    Thread.detachNewThread {
        let started = ContinuousClock.now
        if (try? Connection(conninfo: conninfo, connectTimeout: connectTimeout)) == nil {
            outcome.withLock { $0 = ContinuousClock.now - started }
        }
        ended.signal()
    }
    guard ended.wait(timeout: .now() + 20) == .success else { return nil }
    return outcome.withLock { $0 }
}

/// libpq waits for a server that does not answer as long as the kernel
/// lets it, unless told otherwise: the service tells it.
@Suite("Connecting to PostgreSQL", .timeLimit(.minutes(1)))
struct ConnectTimeoutTests {
    /// Without `connect_timeout` in the conninfo, an attempt gives up after
    /// the service's own limit (here 2 s) with an error, instead of waiting.
    @Test func anAttemptGivesUpOnASilentServerAfterTheDefaultLimit() {
        let server = SilentServer()
        let waited = failure("host=127.0.0.1 port=\(server.port) user=nobody dbname=none", connectTimeout: 2)
        #expect(waited.map { $0 >= .seconds(1) } == true, "\(String(describing: waited)) (nil: still waiting after 20 s)")
    }

    /// The conninfo's own `connect_timeout` wins over the default, in both
    /// of libpq's forms (each attempt waited for the server, then gave up).
    @Test func theConninfosOwnLimitWins() {
        let server = SilentServer()
        for conninfo in [
            "postgresql://nobody@127.0.0.1:\(server.port)/none?connect_timeout=2",
            "host=127.0.0.1 port=\(server.port) connect_timeout=2 dbname=none",
        ] {
            let waited = failure(conninfo, connectTimeout: 600)
            #expect(waited.map { $0 >= .seconds(1) } == true, "\(conninfo): \(String(describing: waited))")
        }
    }

    /// A session takes the default unless its conninfo names a limit, and
    /// the rest of the conninfo as it was written (on `make test`'s server).
    @Test(.enabled(if: TestDatabase.server != nil)) func aSessionUsesTheDefaultUnlessItsConninfoSaysOtherwise() throws {
        let conninfo = TestDatabase.create()
        let plain = try Connection(conninfo: conninfo)
        #expect(plain.setting("connect_timeout") == String(Connection.defaultConnectTimeout))
        #expect(try plain.scalar("SELECT 1") == 1)
        let own = try Connection(conninfo: conninfo + " connect_timeout=7")
        #expect(own.setting("connect_timeout") == "7")
        #expect(own.setting("dbname") == plain.setting("dbname"))
        #expect(own.setting("dbname")?.hasPrefix("ct_") == true)
    }
}
