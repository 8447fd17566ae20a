import Foundation

/// A response of the HTTP endpoint.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    /// The body as it is sent.
    public var bytes: [UInt8]
    /// The body as text (UTF-8).
    public var body: String {
        get { String(decoding: bytes, as: UTF8.self) }
        set { bytes = Array(newValue.utf8) }
    }
    /// Further header fields (`Content-Security-Policy`, `Cache-Control`).
    public var headers: [String: String]
    /// An event stream (`text/event-stream`): the body is its first events,
    /// and the connection stays open for those published later.
    public var streams: Bool
    /// A body sent as it is made (chunked), in place of `bytes`.
    public var bodyStream: HTTPBodyStream?

    public init(
        status: Int, contentType: String = "text/plain; charset=utf-8", body: String, headers: [String: String] = [:],
        streams: Bool = false
    ) {
        self.init(status: status, contentType: contentType, bytes: Array(body.utf8), headers: headers, streams: streams)
    }

    /// A response of bytes (a picture).
    public init(
        status: Int, contentType: String, bytes: [UInt8], headers: [String: String] = [:], streams: Bool = false
    ) {
        self.status = status
        self.contentType = contentType
        self.bytes = bytes
        self.headers = headers
        self.streams = streams
    }

    /// A response whose body is sent as `stream` makes it.
    public init(status: Int, contentType: String, stream: HTTPBodyStream, headers: [String: String] = [:]) {
        self.init(status: status, contentType: contentType, bytes: [], headers: headers)
        bodyStream = stream
    }

    /// The header fields as the server takes them: `Name: value` lines, sorted.
    var headerLines: String {
        var lines = "Content-Type: \(contentType)\n"
        if streams { lines += "Cache-Control: no-store\n" }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { lines += "\(name): \(value)\n" }
        return lines
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
