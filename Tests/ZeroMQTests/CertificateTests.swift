import Foundation
import Testing
import ZeroMQ

@Suite("ZeroMQ certificates (ZPL, RFC 4)", .timeLimit(.minutes(2)))
struct CertificateTests {
    /// As pyzmq's `zmq.auth.create_certificates` writes a secret certificate.
    static let pyzmqSecret = """
        #   ****  Generated on 2026-11-30 12:27:45.210956 by pyzmq  ****
        #   ZeroMQ CURVE **Secret** Certificate
        #   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.

        metadata
        curve
            public-key = "%PUBLIC%"
            secret-key = "%SECRET%"

        """

    @Test func aCertificateAsPyzmqWritesItIsRead() throws {
        let pair = try CurveKeyPair.generate()
        let text = Self.pyzmqSecret.replacingOccurrences(of: "%PUBLIC%", with: pair.publicKey)
            .replacingOccurrences(of: "%SECRET%", with: pair.secretKey)
        let certificate = try CurveCertificate.parse(text, file: "a.key_secret")
        #expect(certificate.publicKey == pair.publicKey && certificate.secretKey == pair.secretKey)
        #expect(certificate.metadata.isEmpty)
    }

    @Test func writtenCertificatesReadBackWithTheirMetadata() throws {
        let pair = try CurveKeyPair.generate()
        let original = CurveCertificate(
            publicKey: pair.publicKey, secretKey: pair.secretKey, metadata: ["name": "kitchen", "roles": "publish,read"])
        let secret = try CurveCertificate.parse(original.text(secret: true), file: "k.key_secret")
        #expect(secret == original)
        let text = original.text(secret: false)
        #expect(!text.contains(pair.secretKey))
        let publicOnly = try CurveCertificate.parse(text, file: "k.key")
        #expect(publicOnly.secretKey == nil && publicOnly.metadata["roles"] == "publish,read")
    }

    @Test(arguments: [
        ("curve\n    public-key = \"short\"\n", "k.key:2: public-key must be 40 characters of Z85"),
        ("metadata\n        name = \"x\"\n", "k.key:2: indented deeper than the line above allows"),
        ("curve\n\tpublic-key = \"x\"\n", "k.key:2: indent with four spaces"),
        ("curve\n    public-key = \"abc\n", "k.key:2: the value's closing \" is missing"),
        ("metadata\n    name = \"x\"\n", "k.key: no curve/public-key; not a ZeroMQ certificate"),
    ])
    func badCertificatesNameTheFileAndLine(text: String, expected: String) {
        #expect {
            try CurveCertificate.parse(text, file: "k.key")
        } throws: { error in
            "\(error)".hasPrefix(expected)
        }
    }

    @Test func aSecretKeyThatIsNotThePublicKeysPairIsRefused() throws {
        let a = try CurveKeyPair.generate()
        let b = try CurveKeyPair.generate()
        let text = "curve\n    public-key = \"\(a.publicKey)\"\n    secret-key = \"\(b.secretKey)\"\n"
        #expect {
            try CurveCertificate.parse(text, file: "x.key_secret")
        } throws: { error in
            "\(error)".contains("does not belong")
        }
    }

    @Test func unquotedValuesAndCommentsFollowRFC4() throws {
        let values = try ZPL.parse("# comment\nmain\n    key = value # trailing\n    other = 'quoted # not a comment'\n")
        #expect(values["main/key"]?.value == "value")
        #expect(values["main/other"]?.value == "quoted # not a comment")
    }
}
