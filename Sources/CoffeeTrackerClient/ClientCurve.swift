import CoffeeDomain
import Foundation
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// A client's CURVE settings: the service's public key and the client's own pair.
public struct ClientCurve: Sendable {
    public var serverKey: String
    public var keys: CurveKeyPair

    public init(serverKey: String, keys: CurveKeyPair) {
        self.serverKey = serverKey
        self.keys = keys
    }

    /// What a command's `--key` and `--server-key` (or the key the service
    /// published in `endpoints.json`) come to: nil for plaintext.
    ///
    /// - Throws: `QueryClient.Failure` for a key file that cannot be used,
    ///   a server key that is not one, or a CURVE service without `--key`.
    public static func from(keyFile: String?, serverKey: String?, discovered: String?) throws -> ClientCurve? {
        guard let keyFile else {
            if let key = serverKey ?? discovered {
                throw QueryClient.Failure(
                    description:
                        "the service requires CURVE (its key is \(key.prefix(8))…): pass --key NAME.key_secret, a certificate from `coffee-tracker keygen NAME` whose NAME.key is in the service's clients directory"
                )
            }
            return nil
        }
        let certificate: CurveCertificate
        do {
            certificate = try CurveCertificate.load(path: keyFile)
        } catch {
            throw QueryClient.Failure(description: "--key: \(error)")
        }
        guard let secret = certificate.secretKey, let keys = CurveKeyPair(secretKey: secret) else {
            throw QueryClient.Failure(description: "--key \(keyFile) holds no secret-key: name the .key_secret file")
        }
        guard let server = serverKey ?? discovered else {
            throw QueryClient.Failure(
                description: "--key needs the service's public key: --server-key KEY, or --config to read it from endpoints.json")
        }
        guard CurveKeyPair.isKey(server) else {
            throw QueryClient.Failure(description: "--server-key must be a 40-character Z85 public key, got \"\(server)\"")
        }
        return ClientCurve(serverKey: server, keys: keys)
    }
}

extension ZMQSocket {
    /// Makes the socket a CURVE client when `curve` is set; before connecting.
    public func secure(_ curve: ClientCurve?) throws(ZMQError) {
        guard let curve else { return }
        try setCurveClient(serverKey: curve.serverKey, publicKey: curve.keys.publicKey, secretKey: curve.keys.secretKey)
    }
}
