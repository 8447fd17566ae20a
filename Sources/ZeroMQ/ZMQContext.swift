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
public struct CurveKeyPair: Sendable, Equatable {
    public let publicKey: String
    public let secretKey: String

    public init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// The pair of `secretKey` (its public key derived), or nil when it is
    /// not a 40-character Z85 key.
    public init?(secretKey: String) {
        guard Self.isKey(secretKey) else { return nil }
        var pub = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&pub, secretKey) == 0 else { return nil }
        self.init(publicKey: Self.text(pub), secretKey: secretKey)
    }

    /// Whether `text` is a CURVE key in Z85: 40 characters that decode to 32 bytes.
    public static func isKey(_ text: String) -> Bool { binary(text) != nil }

    /// The 32 bytes of a Z85 key, or nil when it is not one.
    public static func binary(_ text: String) -> [UInt8]? {
        guard text.utf8.count == 40 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        return zmq_z85_decode(&bytes, text) != nil ? bytes : nil
    }

    /// The Z85 text of a 32-byte binary key (as a ZAP request carries it).
    public static func z85(_ key: some Collection<UInt8>) -> String? {
        guard key.count == 32 else { return nil }
        var out = [CChar](repeating: 0, count: 41)
        let bytes = Array(key)
        guard zmq_z85_encode(&out, bytes, 32) != nil else { return nil }
        return text(out)
    }

    private static func text(_ c: [CChar]) -> String {
        String(decoding: c.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A new random key pair.
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var pub = [CChar](repeating: 0, count: 41)
        var sec = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&pub, &sec) == 0 else { throw ZMQError.last("generating a CURVE key pair") }
        return CurveKeyPair(publicKey: text(pub), secretKey: text(sec))
    }
}
