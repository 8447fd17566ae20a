import CoffeeDomain
import Foundation
import HealthStore
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// Where a file ends: `processed/` after its commit, or `failed/` beside
/// `<name>.error.json` with its reason. Every file ends in one of them, even
/// one whose name is not UTF-8 or too long to take `.error.json`.
extension InboxImporter {
    /// Moves a refused file to `failed/` beside its `.error.json`.
    func refuse(_ name: String, _ error: InboxFileError) {
        refuse(source: Array((inbox.path + "/" + name).utf8), shownAs: name, error)
    }

    /// Refuses a file whose name is not UTF-8: it moves to `failed/` under
    /// its name with the bytes that are not printable ASCII escaped as `%XX`.
    func refuseUndecodable(_ bytes: [UInt8]) {
        let shown = InboxNames.escaped(bytes)
        if InboxFileParser.isIgnored(shown) { return }  // a dot-file or one still being written, as any other
        let error = InboxFileError(
            "the file's name is not valid UTF-8 (shown here with its bytes escaped as %XX); rename it and drop it in again")
        refuse(source: Array(inbox.path.utf8) + [UInt8(ascii: "/")] + bytes, shownAs: shown, error)
    }

    private func refuse(source: [UInt8], shownAs name: String, _ error: InboxFileError) {
        ServiceCounters.bump(counters.filesFailed)
        do {
            let moved = try move(source: source, as: name, to: failed)
            var members: [(String, JSONValue)] = [("file", .string(name)), ("error", .string(error.message))]
            if moved != name { members.append(("movedAs", .string(moved))) }
            if let index = error.index { members.append(("index", .int(Int64(index)))) }
            if let line = error.line { members.append(("line", .int(Int64(line)))) }
            if let field = error.field { members.append(("field", .string(field))) }
            members.append(("at", .string(RFC3339.string(Date()))))
            try DurableFile.write(
                JSONValue.object(members).data(), to: failed.appendingPathComponent(moved + ".error.json"))
            logger.warning("refused inbox file", metadata: ["file": "\(name)", "error": "\(error.message)"])
        } catch {
            logger.error("could not move a refused file to failed/", metadata: ["file": "\(name)", "error": "\(error)"])
        }
    }

    /// Renames `name` into `folder`; fsyncs both folders. Returns the name it got.
    func move(_ name: String, to folder: URL) throws -> String {
        try move(source: Array((inbox.path + "/" + name).utf8), as: name, to: folder)
    }

    /// Renames the file at `source` (a path's raw bytes) into `folder` as
    /// `name`, shortened to fit beside its `.error.json` (`InboxNames.fitted`)
    /// and with a suffix when taken; fsyncs both folders. Returns the name it got.
    private func move(source: [UInt8], as name: String, to folder: URL) throws -> String {
        let base = InboxNames.fitted(name)
        var target = base
        var n = 1
        while FileManager.default.fileExists(atPath: folder.appendingPathComponent(target).path)
            || FileManager.default.fileExists(atPath: folder.appendingPathComponent(target + ".error.json").path)
        {
            target = "\(base).\(n)"
            n += 1
        }
        let to = folder.appendingPathComponent(target).path
        let from = source + [0]
        _ = try from.withUnsafeBufferPointer { path in
            Result { () throws(SystemCallError) in
                try Syscall.call("rename", "\(name) to \(to)") {
                    path.withMemoryRebound(to: CChar.self) { rename($0.baseAddress!, to) }
                }
            }
        }.get()
        try DurableFile.syncFolder(folder.path)
        try DurableFile.syncFolder(inbox.path)
        return target
    }

    /// `<name>.summary.json` beside a Health export in `processed/` (docs/protocol.md §5).
    func writeSummary(_ summary: ImportSummary, _ result: WriteResult, of moved: String) throws {
        let body = JSONValue.object([
            ("file", .string(moved)), ("records", .int(Int64(summary.records))),
            ("caffeineRecords", .int(Int64(summary.caffeineRecords))), ("imported", .int(Int64(result.added))),
            ("duplicates", .int(Int64(result.duplicates))),
            (
                "skipped",
                .array(summary.skipped.map { .object([("line", .int(Int64($0.line))), ("reason", .string($0.reason))]) })
            ),
            ("skippedTotal", .int(Int64(summary.skippedTotal))), ("anchor", .int(result.anchor)),
            ("at", .string(RFC3339.string(Date()))),
        ])
        try DurableFile.write(body.data(), to: processed.appendingPathComponent(moved + ".summary.json"))
    }
}
