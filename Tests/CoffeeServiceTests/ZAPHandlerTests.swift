import CoffeeLogging
import Foundation
import Testing
import ZeroMQ

@testable import CoffeeService

@Suite("ZAP handler: who may connect where (docs/protocol.md §6)", .timeLimit(.minutes(2)))
struct ZAPHandlerTests {
    /// A clients directory with a publisher and a reader; the handler over it.
    static func handler() throws -> (ZAPHandler, CurveKeyPair, CurveKeyPair, ServiceCounters, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-zap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let kitchen = try CurveKeyPair.generate()
        let reader = try CurveKeyPair.generate()
        try CurveCertificate(publicKey: kitchen.publicKey, metadata: ["roles": "publish"]).text(secret: false)
            .write(to: dir.appendingPathComponent("kitchen.key"), atomically: true, encoding: .utf8)
        try CurveCertificate(publicKey: reader.publicKey, metadata: ["name": "phone", "roles": "read"]).text(secret: false)
            .write(to: dir.appendingPathComponent("reader.key"), atomically: true, encoding: .utf8)
        let counters = ServiceCounters()
        let zap = try ZAPHandler(
            context: ZMQContext(), registry: try ClientRegistry(directory: dir.path), counters: counters,
            logger: Logger(label: "test"))
        return (zap, kitchen, reader, counters, dir)
    }

    /// A ZAP request (RFC 27) for `key` on `domain`.
    static func request(_ domain: String, _ key: CurveKeyPair?, mechanism: String = "CURVE") -> [Data] {
        let credentials = key.flatMap { CurveKeyPair.binary($0.publicKey) } ?? [UInt8](repeating: 0, count: 32)
        return [
            Data("1.0".utf8), Data("7".utf8), Data(domain.utf8), Data("127.0.0.1".utf8), Data(), Data(mechanism.utf8),
            Data(credentials),
        ]
    }

    @Test func eachKeyIsAdmittedWhereItsRolesAllowAndNamedThere() throws {
        let (zap, kitchen, reader, counters, dir) = try Self.handler()
        defer { try? FileManager.default.removeItem(at: dir) }
        func status(_ domain: String, _ key: CurveKeyPair) -> (String, String) {
            let reply = zap.reply(to: Self.request(domain, key))
            return (String(decoding: reply[2], as: UTF8.self), String(decoding: reply[4], as: UTF8.self))
        }
        #expect(status("ingest", kitchen) == ("200", "kitchen"))  // name from the file
        #expect(status("query", kitchen).0 == "400")
        #expect(status("updates", kitchen).0 == "400")
        #expect(status("query", reader) == ("200", "phone"))  // name from the metadata
        #expect(status("ingest", reader).0 == "400")
        #expect(status("query", try CurveKeyPair.generate()).0 == "400")  // not in the directory
        #expect(zap.reply(to: Self.request("query", nil, mechanism: "NULL"))[2] == Data("400".utf8))
        #expect(counters.authDenied.value == 5)
        // The reply echoes the request id, as RFC 27 requires.
        #expect(zap.reply(to: Self.request("ingest", kitchen))[1] == Data("7".utf8))
    }

    @Test func aReloadThatFindsABadCertificateKeepsTheOldList() throws {
        let (zap, kitchen, _, _, dir) = try Self.handler()
        defer { try? FileManager.default.removeItem(at: dir) }
        let registry = try ClientRegistry(directory: dir.path)
        try "curve\n    public-key = \"nope\"\n".write(
            to: dir.appendingPathComponent("bad.key"), atomically: true, encoding: .utf8)
        #expect {
            try registry.reload()
        } throws: { error in
            "\(error)".contains("bad.key:2")
        }
        #expect(registry.count == 2)
        try FileManager.default.removeItem(at: dir.appendingPathComponent("bad.key"))
        try FileManager.default.removeItem(at: dir.appendingPathComponent("kitchen.key"))
        #expect(try registry.reload() == 1)
        #expect(registry.client(publicKey: kitchen.publicKey) == nil)
        _ = zap
    }
}
