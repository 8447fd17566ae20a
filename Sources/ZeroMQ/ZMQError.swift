import CZeroMQ

/// A failed libzmq call: errno, `zmq_strerror`, and what was being done
/// (with the endpoint, when there is one).
public struct ZMQError: Error, CustomStringConvertible, Sendable, Equatable {
    public let errno: Int32
    public let context: String

    public init(errno: Int32, context: String) {
        self.errno = errno
        self.context = context
    }

    /// The error of the last libzmq call on this thread.
    static func last(_ context: String) -> ZMQError {
        ZMQError(errno: zmq_errno(), context: context)
    }

    public var message: String { String(cString: zmq_strerror(errno)) }
    public var description: String { "\(context): \(message)" }

    public var isAgain: Bool { errno == EAGAIN }
    public var isInterrupted: Bool { errno == EINTR }
    /// The context was terminated: the owner should close its sockets and end.
    public var isTerminated: Bool { errno == ETERM }
}
