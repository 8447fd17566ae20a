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
            try Syscall.call("listen", address) { Glibc.listen(fd, 64) }
        } catch {
            Syscall.close(fd)
            throw error
        }
        return fd
    }
}
