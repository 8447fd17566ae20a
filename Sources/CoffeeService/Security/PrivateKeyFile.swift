import Foundation
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// A file that holds a secret (a CURVE secret certificate, a TLS key) must be
/// private, as ssh refuses a key others can read.
enum PrivateKeyFile {
    /// Nil when `path` exists and neither group nor others may read it; else
    /// what is wrong, naming `option` (the key that names the file) and what to do.
    static func problem(_ path: String, option: String) -> String? {
        var info = stat()
        do {
            try Syscall.call("stat", path) { stat(path, &info) }
        } catch {
            return "\(option) \(path) cannot be used: \(error)"
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            return
                "\(option) \(path) is readable by group or others (mode \(String(mode, radix: 8))): a secret key must be private; chmod 600 \(path)"
        }
        return nil
    }
}
