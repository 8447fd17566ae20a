import Foundation

/// The head of an HTTP/1.x request as far as the monitoring endpoint needs
/// it: the method and the path. Pure, so that its limits are tested alone.
public enum HTTPRequestHead: Equatable, Sendable {
    /// No blank line yet: read on.
    case incomplete
    /// Larger than the limit before the head ended: close the connection.
    case tooLarge
    /// Not an HTTP request line.
    case malformed
    case request(method: String, path: String)

    /// The most a request may send before its head ends (PROTOCOL.md §9: 8 KiB).
    public static let limit = 8192

    /// Reads `bytes`, everything received so far.
    public static func parse(_ bytes: some Collection<UInt8>) -> HTTPRequestHead {
        let bytes = Array(bytes)
        guard let end = headEnd(bytes) else { return bytes.count > limit ? .tooLarge : .incomplete }
        guard end <= limit else { return .tooLarge }
        let lineEnd = bytes.firstIndex(of: UInt8(ascii: "\r")) ?? end
        let words = bytes[..<lineEnd].split(separator: UInt8(ascii: " "))
        guard words.count == 3, words[2].starts(with: Array("HTTP/1.".utf8)) else { return .malformed }
        let method = String(decoding: words[0], as: UTF8.self)
        var path = String(decoding: words[1], as: UTF8.self)
        if let query = path.firstIndex(of: "?") { path = String(path[..<query]) }
        return .request(method: method, path: path)
    }

    /// The offset just past the blank line that ends the head (`\r\n\r\n`, or `\n\n`).
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        var i = 0
        while i < bytes.count {
            if bytes[i] == 0x0A {
                if i + 1 < bytes.count, bytes[i + 1] == 0x0A { return i + 2 }
                if i + 2 < bytes.count, bytes[i + 1] == 0x0D, bytes[i + 2] == 0x0A { return i + 3 }
            }
            i += 1
        }
        return nil
    }
}

/// A response of the HTTP endpoint.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    public var body: String
    /// Further header fields (`Content-Security-Policy`, `Cache-Control`).
    public var headers: [String: String]
    /// An event stream (`text/event-stream`): the body is its first events,
    /// and the connection stays open for those published later.
    public var streams: Bool

    public init(
        status: Int, contentType: String = "text/plain; charset=utf-8", body: String, headers: [String: String] = [:],
        streams: Bool = false
    ) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
        self.streams = streams
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 431: "Request Header Fields Too Large"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    /// The bytes on the wire. A response closes its connection when its body
    /// is sent, except an event stream, which has no length and stays open.
    public var bytes: [UInt8] {
        let body = Array(self.body.utf8)
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\nContent-Type: \(contentType)\r\n"
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
        head += streams ? "Cache-Control: no-store\r\n\r\n" : "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// One server-sent event whose data is compact JSON (one line: a JSON
    /// string escapes its newlines), as bytes, built without a `String`.
    public static func event(_ name: String, json: Data) -> [UInt8] {
        var out = Array("event: \(name)\ndata: ".utf8)
        out.reserveCapacity(out.count + json.count + 2)
        out += json
        out += [0x0A, 0x0A]
        return out
    }

    /// One server-sent event: `event: NAME` and its data, one `data:` line per line.
    public static func event(_ name: String, data: String) -> String {
        "event: \(name)\n" + data.split(separator: "\n", omittingEmptySubsequences: false).map { "data: \($0)\n" }.joined()
            + "\n"
    }
}
