import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Unix signals as an async sequence: a Dispatch signal source on a private
/// queue, bridged into an `AsyncStream`.
public enum SignalStream {
    public static func make(_ signals: [Int32]) -> AsyncStream<Int32> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        let queue = DispatchQueue(label: "signals")
        var sources: [any DispatchSourceSignal] = []
        for sig in signals {
            signal(sig, SIG_IGN)  // let Dispatch see it instead of the default action
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { @Sendable in continuation.yield(sig) }
            source.resume()
            sources.append(source)
        }
        let held = SourceHolder(sources)
        continuation.onTermination = { _ in held.cancel() }
        return stream
    }

    /// Keeps the sources alive as long as the stream.
    private final class SourceHolder: @unchecked Sendable {
        let sources: [any DispatchSourceSignal]
        init(_ s: [any DispatchSourceSignal]) { sources = s }
        func cancel() { for s in sources { s.cancel() } }
    }

    public static func name(_ sig: Int32) -> String {
        switch sig {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(sig)"
        }
    }
}
