import CoffeeDomain
import Foundation

extension ConfigurationLoader {
    /// The `http` section (docs/protocol.md §9 and §12): the bind, TLS, the
    /// connection limits and the proxies believed.
    static func http(_ s: Object, _ reader: Reader, _ folder: String) throws -> ServiceConfiguration.HTTP {
        var http = ServiceConfiguration.HTTP()
        if s.contains(where: { $0.0 == "bind" && $0.1.isNull }) {
            http.bind = nil
        } else if let v = try reader.string(s, "http.bind") {
            guard let colon = v.lastIndex(of: ":"), UInt16(v[v.index(after: colon)...]) != nil, colon != v.startIndex else {
                throw reader.fail("http.bind", "must be host:port (127.0.0.1:5558) or null, got \"\(v)\"")
            }
            http.bind = v
        }
        if let tls = try reader.section(s, "http.tls", allowed: ["certificateFile", "keyFile"]) {
            guard let certificate = try reader.string(tls, "http.tls.certificateFile") else {
                throw reader.fail("http.tls.certificateFile", "is required with http.tls (a PEM certificate chain)")
            }
            guard let key = try reader.string(tls, "http.tls.keyFile") else {
                throw reader.fail("http.tls.keyFile", "is required with http.tls (the certificate's PEM private key)")
            }
            http.tls = TLSFiles(certificateFile: resolve(certificate, folder), keyFile: resolve(key, folder))
        }
        if let v = try reader.int(s, "http.maxConnections", min: 1) { http.maxConnections = v }
        if let v = try reader.number(s, "http.idleTimeoutS", above: 0) { http.idleTimeoutS = v }
        if let v = try reader.number(s, "http.lockoutS", above: 0) { http.lockoutS = v }
        if let v = try reader.strings(s, "http.trustedProxies") {
            for (i, address) in v.enumerated() where !isIPAddress(address) {
                throw reader.fail("http.trustedProxies[\(i)]", "must be an IP address (127.0.0.1), got \"\(address)\"")
            }
            http.trustedProxies = v
        }
        return http
    }

    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}

extension ConfigurationLoader.Reader {
    func strings(_ object: ConfigurationLoader.Object, _ path: String) throws -> [String]? {
        guard let leaf = path.split(separator: ".").last, let raw = object.last(where: { $0.0 == leaf })?.1 else {
            return nil
        }
        guard case .array(let list) = raw else { throw fail(path, "must be an array of strings") }
        return try list.enumerated().map { (i, item) in
            guard case .string(let s) = item else { throw fail("\(path)[\(i)]", "must be a string") }
            return s
        }
    }
}
