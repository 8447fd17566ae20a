import CWebPush
import CoffeeDomain
import Foundation
import Syscall

/// Web Push (docs/protocol.md §17): the service's VAPID key (RFC 8292),
/// the JWT that names it to a push service, and a message encrypted for a
/// subscription (RFC 8291). The cryptography is OpenSSL's (`CWebPush`).
public enum WebPush {
    /// An error of the cryptography, or of the key's file.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The service's P-256 key pair, which push services know it by.
    public struct Key: Sendable {
        let privateKey: [UInt8]
        /// The uncompressed public point (65 bytes): the page's `applicationServerKey`.
        public let publicKey: [UInt8]

        /// The public key as `coffee-tracker push-key` prints it and the page subscribes with.
        public var publicKeyText: String { Base64URL.encode(publicKey) }

        /// The key in `path` (PKCS#8 PEM), made there (mode 0600, durably) when the file is missing.
        public static func loadOrCreate(path: String) throws -> Key {
            if FileManager.default.fileExists(atPath: path) { return try load(path: path) }
            var privateKey = [UInt8](repeating: 0, count: 32)
            var publicKey = [UInt8](repeating: 0, count: 65)
            guard ctw_generate(&privateKey, &publicKey) == 0 else { throw Failure(description: "could not make a P-256 key") }
            var pem = [CChar](repeating: 0, count: 1024)
            guard ctw_private_to_pem(privateKey, &pem, pem.count) == 0 else {
                throw Failure(description: "could not write the key as PEM")
            }
            let text = String(decoding: pem.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            try DurableFile.create(text, at: path, mode: 0o600)
            return Key(privateKey: privateKey, publicKey: publicKey)
        }

        public static func load(path: String) throws -> Key {
            let pem: String
            do {
                pem = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw Failure(description: "\(path): the push key cannot be read: \(error.localizedDescription)")
            }
            var privateKey = [UInt8](repeating: 0, count: 32)
            var publicKey = [UInt8](repeating: 0, count: 65)
            guard ctw_private_from_pem(pem, &privateKey) == 0, ctw_public_key(privateKey, &publicKey) == 0 else {
                throw Failure(description: "\(path): not a P-256 private key in PEM (remove it to make a new one)")
            }
            return Key(privateKey: privateKey, publicKey: publicKey)
        }

        /// The JWT (ES256) a push service checks: `aud` its origin, `exp`
        /// `expires`, `sub` who to tell of a problem.
        public func token(audience: String, expires: Date, subject: String) throws -> String {
            let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
            let claims = JSONValue.object([
                ("aud", .string(audience)), ("exp", .int(Int64(expires.timeIntervalSince1970))), ("sub", .string(subject)),
            ]).serialized()
            let signed = header + "." + Base64URL.encode(Array(claims.utf8))
            var signature = [UInt8](repeating: 0, count: 64)
            let bytes = Array(signed.utf8)
            guard ctw_sign_es256(privateKey, bytes, bytes.count, &signature) == 0 else {
                throw Failure(description: "could not sign the VAPID token")
            }
            return signed + "." + Base64URL.encode(signature)
        }
    }

    /// `plaintext` encrypted for `subscription` (aes128gcm), under a fresh salt and key.
    public static func encrypt(_ plaintext: [UInt8], for subscription: PushSubscription) throws -> [UInt8] {
        guard plaintext.count <= 3000 else { throw Failure(description: "a push message is at most 3000 bytes") }
        var out = [UInt8](repeating: 0, count: plaintext.count + 86 + 17 + 16)
        var length = 0
        guard ctw_encrypt(subscription.p256dh, subscription.auth, plaintext, plaintext.count, &out, &length) == 0 else {
            throw Failure(description: "could not encrypt for the subscription")
        }
        return Array(out.prefix(length))
    }

    /// Whether `bytes` is an uncompressed point of P-256.
    public static func isPublicKey(_ bytes: [UInt8]) -> Bool { bytes.count == 65 && ctw_valid_public_key(bytes) == 0 }

    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = ctw_sha256(bytes, bytes.count, &digest)
        return digest
    }
}
