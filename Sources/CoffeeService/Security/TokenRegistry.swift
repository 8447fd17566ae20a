import CHTTPServer
import CoffeeDomain
import Foundation
import Synchronization
import Syscall

/// What a token may do on the HTTP endpoint (docs/protocol.md §12).
public enum TokenRole: String, Sendable, CaseIterable, Comparable {
    /// The model, changes, stats, the page, its picture and events.
    case read
    /// Adds and deletions, the catalogue's entries.
    case write
    /// The person's settings (`PUT /api/v1/settings`, docs/protocol.md §15).
    case admin
    /// `/metrics`.
    case metrics

    public static func < (a: TokenRole, b: TokenRole) -> Bool { a.rawValue < b.rawValue }
}

/// A token as the service keeps it: its name, the SHA-256 of its text, its roles. Never the token.
public struct StoredToken: Sendable, Equatable {
    public var name: String
    public var digest: [UInt8]
    public var roles: Set<TokenRole>
}

/// `security.tokensDirectory`: one `NAME.token` file per token (mode 0600),
/// read at start and again on `reload()` (SIGHUP); a removed file revokes
/// its token at once. A token is found by its hash, compared in constant
/// time against every one held.
public final class TokenRegistry: Sendable {
    /// A tokens directory or token file that cannot be used, naming it.
    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
    }

    public let directory: String
    private let tokens: Mutex<[StoredToken]>

    public init(directory: String) throws(LoadError) {
        self.directory = directory
        tokens = Mutex(try Self.read(directory))
    }

    /// Reads the directory again; on an error the old list stays and the error is thrown.
    @discardableResult
    public func reload() throws(LoadError) -> Int {
        let fresh = try Self.read(directory)
        tokens.withLock { $0 = fresh }
        return fresh.count
    }

    public var count: Int { tokens.withLock { $0.count } }

    /// The token whose text is `token`, or nil. Every held hash is compared
    /// whole, whatever matched: the time taken says nothing of which, or how near.
    public func token(matching token: String) -> StoredToken? {
        let digest = Self.digest(of: token)
        return tokens.withLock { held in
            var found: StoredToken?
            for candidate in held where Self.constantTimeEqual(candidate.digest, digest) { found = candidate }
            return found
        }
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }

    /// SHA-256 of the token's whole text.
    public static func digest(of token: String) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let text = Array(token.utf8)
        _ = text.withUnsafeBytes { cth_sha256($0.baseAddress, $0.count, &digest) }
        return digest
    }

    /// A new token: `ct_` and 256 random bits in base64url (43 characters).
    public static func newToken() -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        precondition(cth_random(&bytes, bytes.count) == 0, "GnuTLS's random generator failed")
        let base64 = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "ct_" + base64
    }

    /// Writes `NAME.token` for `token` into `directory` (made 0700 if missing), mode 0600, durably.
    ///
    /// - Throws: `LoadError` when the name is not a plain name or the file exists.
    public static func write(token: String, name: String, roles: Set<TokenRole>, into directory: String) throws(LoadError) {
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }), !name.hasPrefix(".")
        else {
            throw LoadError(description: "a token's name is letters, digits, '-', '_' and '.', got \"\(name)\"")
        }
        let path = (directory as NSString).appendingPathComponent(name + ".token")
        let json = JSONValue.object([
            ("name", .string(name)), ("sha256", .string(digest(of: token).lowercaseHex)),
            ("roles", .array(roles.sorted().map { .string($0.rawValue) })),
        ])
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw LoadError(description: "security.tokensDirectory \(directory) cannot be made: \(error.localizedDescription)")
        }
        do {
            try DurableFile.create(json.serialized() + "\n", at: path, mode: 0o600)
        } catch {
            if error.errno == EEXIST {
                throw LoadError(description: "\(path) exists: remove it first (that revokes the token it holds)")
            }
            throw LoadError(description: "\(path) cannot be written: \(error)")
        }
    }

    private static func read(_ directory: String) throws(LoadError) -> [StoredToken] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw LoadError(description: "security.tokensDirectory \(directory) cannot be read (\(error.localizedDescription))")
        }
        var tokens: [StoredToken] = []
        for file in names.sorted() where file.hasSuffix(".token") {
            let path = (directory as NSString).appendingPathComponent(file)
            tokens.append(try parse(path: path, defaultName: String(file.dropLast(".token".count))))
        }
        return tokens
    }

    static func parse(path: String, defaultName: String) throws(LoadError) -> StoredToken {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LoadError(
                description:
                    "\(path) cannot be read by this user: make it with coffee-tracker token run as the service's user, or chown it"
            )
        }
        guard case .object(let members)? = try? JSONReader.parse(data) else {
            throw LoadError(description: "\(path): not a token file (a JSON object with sha256 and roles)")
        }
        let fields = Dictionary(members, uniquingKeysWith: { first, _ in first })
        guard case .string(let hex)? = fields["sha256"], hex.count == 64,
            let digest = Self.bytes(hex: hex)
        else {
            throw LoadError(description: "\(path): sha256 must be 64 lower-case hex digits")
        }
        var roles: Set<TokenRole> = []
        if case .array(let items)? = fields["roles"] {
            for item in items {
                guard case .string(let text) = item, let role = TokenRole(rawValue: text) else {
                    throw LoadError(
                        description:
                            "\(path): roles are \(TokenRole.allCases.map(\.rawValue).joined(separator: ", ")), got \(item.serialized())"
                    )
                }
                roles.insert(role)
            }
        } else {
            throw LoadError(description: "\(path): roles must be an array")
        }
        var name = defaultName
        if case .string(let given)? = fields["name"] { name = given }
        return StoredToken(name: name, digest: digest, roles: roles)
    }

    private static func bytes(hex: String) -> [UInt8]? {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16), hex[index..<next].lowercased() == hex[index..<next] else {
                return nil
            }
            out.append(byte)
            index = next
        }
        return out
    }
}
