import COutbound
import CoffeeDomain
import Foundation

/// What a deliverer POSTs through (`OutboxDeliverer`): libcurl's `HTTPPoster`,
/// or a test's. Used on one thread.
protocol AlertPosting: AnyObject {
    func post(_ url: String, headers: [(String, String)], body: [UInt8]) -> HTTPPoster.Outcome
}

/// HTTP POSTs through libcurl (`COutbound`), on the thread that owns it: one
/// connection kept from request to request, so that a burst to one receiver
/// rides one keep-alive connection. Not for sharing between threads.
final class HTTPPoster: AlertPosting {
    /// What a POST came to: a status, or why none came.
    enum Outcome: Equatable {
        case answered(Int)
        case failed(String)
    }

    private let client: OpaquePointer
    let connectTimeoutMs: Int
    let timeoutMs: Int

    /// libcurl's global state, made once, before any poster.
    private static let initialized: Bool = cto_global_init() == 0

    init(connectTimeoutMs: Int = 5000, timeoutMs: Int = 10_000) {
        _ = Self.initialized
        client = cto_client_new()
        self.connectTimeoutMs = connectTimeoutMs
        self.timeoutMs = timeoutMs
    }

    deinit { cto_client_free(client) }

    /// POSTs `body` to `url` with `headers`; blocks until answered or timed out.
    func post(_ url: String, headers: [(String, String)], body: [UInt8]) -> Outcome {
        var result = cto_result()
        let lines = headers.map { "\($0.0): \($0.1)" }
        var cLines = lines.map { strdup($0) }
        defer { for line in cLines { free(line) } }
        cLines.withUnsafeMutableBufferPointer { pointers in
            pointers.withMemoryRebound(to: UnsafePointer<CChar>?.self) { headerPointers in
                body.withUnsafeBytes { raw in
                    cto_post(
                        client, url, headerPointers.baseAddress, headerPointers.count, raw.baseAddress, raw.count,
                        connectTimeoutMs, timeoutMs, nil, &result)
                }
            }
        }
        guard result.status != 0 else {
            let error = withUnsafeBytes(of: result.error) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            return .failed(error.isEmpty ? "no answer" : error)
        }
        return .answered(Int(result.status))
    }

    /// HMAC-SHA256 of `data` under `key`, in lower-case hex.
    static func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = key.withUnsafeBytes { k in
            data.withUnsafeBytes { d in cto_hmac_sha256(k.baseAddress, k.count, d.baseAddress, d.count, &digest) }
        }
        return digest.lowercaseHex
    }
}
