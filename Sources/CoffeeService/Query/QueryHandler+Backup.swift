import CoffeeDomain
import Foundation
import HealthStore
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

extension QueryHandler {
    /// `backup` (docs/protocol.md §11): a consistent copy of the store, as of one
    /// anchor, written into `store.backupDirectory` under a plain `name`,
    /// fsynced before the reply.
    func backup(_ request: QueryRequest) async throws -> JSONValue {
        if store.isShared {
            throw QueryError(
                .unavailable, "the store is in PostgreSQL: back it up with PostgreSQL's tools (pg_dump, pg_basebackup)")
        }
        guard let backupDirectory else { throw QueryError(.unavailable, "backups are not configured") }
        let name: String
        switch request.name {
        case .value(let v): name = v
        case .absent: throw QueryError(.badRequest, "name is required: a plain file name", field: "name")
        case .wrongType: throw QueryError(.badRequest, "name must be a string", field: "name")
        }
        if let refusal = Self.backupNameRefusal(name) { throw QueryError(.badRequest, refusal, field: "name") }
        let path = (backupDirectory as NSString).appendingPathComponent(name)
        do {
            try FileManager.default.createDirectory(
                atPath: backupDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw QueryError(.unavailable, "store.backupDirectory \(backupDirectory) cannot be made: \(error)")
        }
        let result: BackupResult
        do {
            result = try await store.backup(to: path)
        } catch let error as SystemCallError where error.errno == EEXIST {
            throw QueryError(.badRequest, "a backup named \"\(name)\" exists; choose another name", field: "name")
        } catch {
            logger.error("backup failed", metadata: ["file": "\(path)", "error": "\(error)"])
            throw QueryError(.unavailable, "the backup could not be written: \(error)")
        }
        logger.notice(
            "backup written", metadata: ["file": "\(path)", "anchor": "\(result.anchor)", "bytes": "\(result.bytes)"])
        return .object([
            ("ok", true), ("anchor", .int(result.anchor)), ("bytes", .int(result.bytes)), ("file", .string(path)),
        ])
    }

    /// Why `name` is not a plain file name, or nil when it is one.
    static func backupNameRefusal(_ name: String) -> String? {
        if name.isEmpty { return "name must not be empty" }
        if name.contains("/") { return "name must be a plain file name, not a path (no /)" }
        if name == "." || name == ".." { return "name must be a plain file name, not . or .." }
        if name.utf8.contains(0) { return "name must not contain NUL" }
        if name.hasPrefix(".") { return "name must not start with . (hidden, and the temporary files' prefix)" }
        if name.utf8.count > 200 { return "name must be at most 200 bytes" }
        return nil
    }
}
