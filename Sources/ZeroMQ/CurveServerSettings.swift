/// How an endpoint is secured under `security.curve` (the service's) or a
/// relay's `--secret-key-file`: a CURVE server with
/// the service's secret key, checked by the ZAP handler under `domain`.
public struct CurveServerSettings: Sendable {
    public var secretKey: String
    /// The ZAP domain: the endpoint's name (`ingest`, `updates`, `query`),
    /// which tells the handler which role a client needs.
    public var domain: String

    public init(secretKey: String, domain: String) {
        self.secretKey = secretKey
        self.domain = domain
    }
}

extension ZMQSocket {
    /// Makes the socket a CURVE server checked by ZAP, when `curve` is set;
    /// before binding.
    public func secure(_ curve: CurveServerSettings?) throws(ZMQError) {
        guard let curve else { return }
        try setZapDomain(curve.domain)
        try setCurveServer(secretKey: curve.secretKey)
    }
}
