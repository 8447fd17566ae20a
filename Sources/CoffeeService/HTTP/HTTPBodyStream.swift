import Synchronization

/// A body made as it is sent (chunked transfer encoding): for an answer too
/// large to hold, such as `GET /api/v1/export.csv`. `produce` writes it in
/// pieces; each write waits while the client has not taken most of what it
/// has, so a client that reads slowly, or not at all, holds one piece, and
/// the producer never runs ahead of it.
public final class HTTPBodyStream: Sendable, Equatable {
    /// Writes the body through `write`; a throw cuts the body short (the
    /// connection is closed without chunked encoding's last chunk, so the
    /// client sees it incomplete).
    public typealias Producer = @Sendable (_ write: Writer) async throws -> Void
    /// Sends one piece, after waiting while the client is behind; false
    /// when the client is gone, and the producer should stop.
    public typealias Writer = @Sendable ([UInt8]) async -> Bool

    let produce: Producer

    public init(_ produce: @escaping Producer) { self.produce = produce }

    public static func == (a: HTTPBodyStream, b: HTTPBodyStream) -> Bool { a === b }
}

/// Tells a body's writer, waiting for the client, that it may go on: told
/// once per wait, possibly before the wait begins.
final class BodyWriterSignal: Sendable {
    private enum State {
        case idle, told
        case waiting(CheckedContinuation<Void, Never>)
    }

    private let state = Mutex<State>(.idle)

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let toldAlready = state.withLock { state -> Bool in
                if case .told = state {
                    state = .idle
                    return true
                }
                state = .waiting(continuation)
                return false
            }
            if toldAlready { continuation.resume() }
        }
    }

    func tell() {
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if case .waiting(let continuation) = state {
                state = .idle
                return continuation
            }
            state = .told
            return nil
        }
        waiting?.resume()
    }
}
