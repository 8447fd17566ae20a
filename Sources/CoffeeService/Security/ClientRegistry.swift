import Foundation
import Synchronization
import ZeroMQ

/// What a client's key may do (docs/protocol.md §6): HealthKit's share and read
/// authorisations, and the bus's publish and subscribe.
public enum Role: String, Sendable, CaseIterable, Comparable {
    /// Send to the ingest endpoint.
    case publish
    /// Receive from the update endpoint.
    case subscribe
    /// Query `ping`, `changes`, `model`, `stats`.
    case read
    /// Query `add`, `delete`, `putCatalogue`.
    case write
    /// Query `putSettings`: what the person's model goes by (§15).
    case admin

    public static func < (a: Role, b: Role) -> Bool { a.rawValue < b.rawValue }
}

/// An admitted client: a public certificate from the clients directory.
public struct AdmittedClient: Sendable, Equatable {
    /// The certificate's `metadata/name`, or its file name without `.key`:
    /// what ZeroMQ's `User-Id` carries for its connections.
    public var name: String
    public var publicKey: String
    public var roles: Set<Role>
}

/// The clients directory (`security.curve.clientsDirectory`): the public
/// certificates (`*.key`) of every client admitted, as CZMQ's certificate
/// store and pyzmq's authenticator read such a folder. Read at start and
/// again on `reload()` (SIGHUP); a reload that finds a bad certificate
/// keeps the list it had.
public final class ClientRegistry: Sendable {
    /// A clients directory that cannot be used, naming the file and the line.
    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
    }

    private struct Clients {
        var byKey: [String: AdmittedClient] = [:]
        var byName: [String: AdmittedClient] = [:]
    }

    public let directory: String
    private let clients: Mutex<Clients>

    /// Reads `directory`.
    ///
    /// - Throws: `LoadError` naming the file (and line) of the first bad certificate.
    public init(directory: String) throws(LoadError) {
        self.directory = directory
        clients = Mutex(try Self.read(directory))
    }

    /// Reads the directory again and swaps the list in; on any error the
    /// old list stays and the error is thrown. Returns how many clients
    /// are admitted now.
    @discardableResult
    public func reload() throws(LoadError) -> Int {
        let fresh = try Self.read(directory)
        clients.withLock { $0 = fresh }
        return fresh.byKey.count
    }

    public func client(publicKey: String) -> AdmittedClient? { clients.withLock { $0.byKey[publicKey] } }
    public func client(named name: String) -> AdmittedClient? { clients.withLock { $0.byName[name] } }
    public var count: Int { clients.withLock { $0.byKey.count } }

    private static func read(_ directory: String) throws(LoadError) -> Clients {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw LoadError(
                description: "security.curve.clientsDirectory \(directory) cannot be read (\(error.localizedDescription))")
        }
        var clients = Clients()
        for file in names.sorted() where file.hasSuffix(".key") {
            let path = (directory as NSString).appendingPathComponent(file)
            let certificate: CurveCertificate
            do {
                certificate = try CurveCertificate.load(path: path)
            } catch {
                throw LoadError(description: error.description)
            }
            let name = certificate.metadata["name"].flatMap { $0.isEmpty ? nil : $0 } ?? String(file.dropLast(4))
            let roles: Set<Role>
            if let text = certificate.metadata["roles"] {
                var parsed: Set<Role> = []
                for word in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !word.isEmpty {
                    guard let role = Role(rawValue: word) else {
                        throw LoadError(
                            description:
                                "\(path): roles: unknown role \"\(word)\"; the roles are publish, subscribe, read, write, admin"
                        )
                    }
                    parsed.insert(role)
                }
                roles = parsed
            } else {
                roles = Set(Role.allCases)
            }
            if let other = clients.byName[name] {
                throw LoadError(
                    description: "\(path): the name \"\(name)\" is already used by the key \(other.publicKey.prefix(8))…")
            }
            let client = AdmittedClient(name: name, publicKey: certificate.publicKey, roles: roles)
            clients.byKey[certificate.publicKey] = client
            clients.byName[name] = client
        }
        return clients
    }
}
