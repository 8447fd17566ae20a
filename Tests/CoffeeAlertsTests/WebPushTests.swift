import CoffeeDomain
import Foundation
import Testing

@testable import CoffeeAlerts

/// Web Push's pieces (docs/protocol.md §17) alone: the key's file, the
/// token's shape, a message's framing, a subscription's checks. The
/// integration tests decrypt and verify with another implementation.
@Suite("Web Push")
struct WebPushTests {
    @Test func base64URLHasNoPaddingAndTheURLsAlphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF] && Base64URL.decode("-_8=") == [0xFB, 0xFF])
        #expect(Base64URL.decode("+/8") == nil)  // the standard alphabet is not base64url
    }

    @Test func theKeyIsMadeOnceAsAPrivateFileAndReadBackTheSame() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-push-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("vapid.pem").path
        let made = try WebPush.Key.loadOrCreate(path: path)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(try WebPush.Key.loadOrCreate(path: path).publicKey == made.publicKey)
        #expect(made.publicKey.count == 65 && made.publicKey[0] == 4 && WebPush.isPublicKey(made.publicKey))
        try "not a key".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: WebPush.Failure.self) { try WebPush.Key.load(path: path) }
    }

    @Test func aMessageHasItsHeaderAndOneRecordAndAFreshSaltEachTime() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-push-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let browser = try WebPush.Key.loadOrCreate(path: dir.appendingPathComponent("b.pem").path)
        let subscription = PushSubscription(
            endpoint: "https://push.example.net/x", p256dh: browser.publicKey, auth: [UInt8](repeating: 1, count: 16),
            created: "")
        let plaintext = Array("{\"title\":\"Over 300 mg\"}".utf8)
        let one = try WebPush.encrypt(plaintext, for: subscription)
        let two = try WebPush.encrypt(plaintext, for: subscription)
        // salt 16, record size 4, key id length 1, the sender's key 65; then the text, its delimiter and the tag.
        #expect(one.count == 86 + plaintext.count + 1 + 16)
        #expect(Array(one[16..<21]) == [0, 0, 0x10, 0, 65])
        #expect(one[21] == 4 && WebPush.isPublicKey(Array(one[21..<86])))
        #expect(one.prefix(16) != two.prefix(16) && one[21..<86] != two[21..<86])
        let token = try browser.token(audience: "https://push.example.net", expires: Date(), subject: "mailto:a@b")
        let parts = token.split(separator: ".")
        #expect(parts.count == 3 && Base64URL.decode(String(parts[2]))?.count == 64)
    }

    @Test func aSubscriptionIsCheckedFieldByField() throws {
        let now = Date(timeIntervalSince1970: 0)
        func refusal(_ body: String) -> String? {
            do {
                _ = try PushSubscription(registering: try JSONReader.parse(Data(body.utf8)), now: now)
                return nil
            } catch {
                return (error as? ValidationError)?.field
            }
        }
        let point = Base64URL.encode([4] + [UInt8](repeating: 1, count: 64))  // not on the curve
        let auth = Base64URL.encode([UInt8](repeating: 2, count: 16))
        #expect(refusal(#"{"endpoint": "ftp://x/y", "keys": {}}"#) == "endpoint")
        #expect(
            refusal(#"{"endpoint": "https://p.example/y", "keys": {"p256dh": "\#(point)", "auth": "\#(auth)"}}"#) == "keys.p256dh"
        )
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-push-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = try WebPush.Key.loadOrCreate(path: dir.appendingPathComponent("k.pem").path).publicKeyText
        #expect(refusal(#"{"endpoint": "https://p.example/y", "keys": {"p256dh": "\#(key)", "auth": "AAAA"}}"#) == "keys.auth")
        let good = try PushSubscription(
            registering: try JSONReader.parse(
                Data(#"{"endpoint": "https://p.example:8443/y", "keys": {"p256dh": "\#(key)", "auth": "\#(auth)"}}"#.utf8)),
            now: now)
        #expect(good.origin == "https://p.example:8443" && good.id.count == 32)
        #expect(PushSubscription(stored: good.stored) == good)
        #expect(PushSubscription(stored: "null") == nil)
    }
}
