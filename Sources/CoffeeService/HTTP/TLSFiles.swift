import CHTTPServer
import Foundation

/// `http.tls`: a PEM certificate chain and its key. The key must be private
/// (as ssh refuses a key others can read); both are read at start and again
/// on SIGHUP, so that a renewed certificate needs no restart.
public struct TLSFiles: Sendable, Equatable {
    public var certificateFile: String
    public var keyFile: String

    public init(certificateFile: String, keyFile: String) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }

    /// A certificate or key that cannot be used, saying why and what to do.
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads both files and makes them the ones every later handshake uses.
    public func install() throws(Refusal) {
        let (certificate, key) = try read()
        var error = [CChar](repeating: 0, count: 256)
        let rc = certificate.withUnsafeBufferPointer { c in
            key.withUnsafeBufferPointer { k in cth_tls_load(nil, c.baseAddress, c.count, k.baseAddress, k.count, &error, 256) }
        }
        guard rc == 0 else { throw Refusal(description: "http.tls: \(cText(error))") }
    }

    /// The same checks, nothing installed (`coffee-tracker check`).
    public func check() throws(Refusal) {
        let (certificate, key) = try read()
        var error = [CChar](repeating: 0, count: 256)
        let rc = certificate.withUnsafeBufferPointer { c in
            key.withUnsafeBufferPointer { k in cth_tls_check(c.baseAddress, c.count, k.baseAddress, k.count, &error, 256) }
        }
        guard rc == 0 else { throw Refusal(description: "http.tls: \(cText(error))") }
    }

    private func read() throws(Refusal) -> ([CChar], [CChar]) {
        if let problem = PrivateKeyFile.problem(keyFile, option: "http.tls.keyFile") { throw Refusal(description: problem) }
        func contents(_ path: String, _ key: String) throws(Refusal) -> [CChar] {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw Refusal(description: "\(key) \(path) cannot be read")
            }
            return data.map { CChar(bitPattern: $0) }
        }
        return (try contents(certificateFile, "http.tls.certificateFile"), try contents(keyFile, "http.tls.keyFile"))
    }
}

/// The text a C call wrote into `buffer`, up to its NUL.
func cText(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
