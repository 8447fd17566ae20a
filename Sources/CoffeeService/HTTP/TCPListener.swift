import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP endpoint's listening socket.
enum TCPListener {
    /// A listening TCP socket on `address` (`host:port`, IPv4 or `localhost`).
    static func listen(on address: String) throws(SystemCallError) -> Int32 {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw SystemCallError(call: "bind", detail: "http.bind \(address): expected host:port", errno: EINVAL)
        }
        var host = String(address[..<colon])
        if host == "localhost" { host = "127.0.0.1" }
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &socketAddress.sin_addr) == 1 else {
            throw SystemCallError(call: "bind", detail: "http.bind \(address): not an IPv4 address", errno: EINVAL)
        }
        let fd = try Syscall.call("socket", "http") {
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        }
        do {
            var one: Int32 = 1
            try Syscall.call("setsockopt", "SO_REUSEADDR") {
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            let length = socklen_t(MemoryLayout<sockaddr_in>.size)
            try withUnsafePointer(to: &socketAddress) { (p: UnsafePointer<sockaddr_in>) throws(SystemCallError) in
                try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sa: UnsafePointer<sockaddr>) throws(SystemCallError) in
                    _ = try Syscall.call("bind", "http.bind \(address)") { bind(fd, sa, length) }
                }
            }
            try Syscall.call("listen", address) { Glibc.listen(fd, 1024) }
        } catch {
            Syscall.close(fd)
            throw error
        }
        return fd
    }

    /// The address `fd` is bound to, `host:port`.
    static func address(of fd: Int32) -> String? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count))
        let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(host):\(UInt16(bigEndian: address.sin_port))"
    }
}
