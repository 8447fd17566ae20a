import CZeroMQ

/// A libzmq context. Thread-safe; sockets are not.
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    public init(ioThreads: Int32 = 1) {
        handle = zmq_ctx_new()
        zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads)
        zmq_ctx_set(handle, ZMQ_BLOCKY, 0)  // sockets default to linger 0 unless set
    }

    /// Terminates the context; blocks until every socket of it is closed.
    deinit {
        while zmq_ctx_term(handle) != 0 && zmq_errno() == EINTR {}
    }

    /// libzmq's version, such as "4.3.4".
    public static var version: String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return "\(major).\(minor).\(patch)"
    }

    /// Whether libzmq was built with CURVE security.
    public static var hasCurve: Bool { zmq_has("curve") != 0 }
}

/// A CURVE key pair in Z85 text (40 characters each).
public struct CurveKeyPair: Sendable {
    public let publicKey: String
    public let secretKey: String

    /// A new random key pair.
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var pub = [CChar](repeating: 0, count: 41)
        var sec = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&pub, &sec) == 0 else { throw ZMQError.last("generating a CURVE key pair") }
        func text(_ c: [CChar]) -> String { String(decoding: c.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return CurveKeyPair(publicKey: text(pub), secretKey: text(sec))
    }
}
