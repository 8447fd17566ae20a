import CoffeeDomain
import Foundation
import SQLite
import Synchronization
import Syscall
import Testing

@_spi(Testing) @testable import HealthStore

@Suite("Backups: a copy of the main file while commits go on into the WAL", .timeLimit(.minutes(2)))
struct StoreBackupTests {
    /// Drinks enough for a main file of several copy chunks.
    private func fill(_ store: HealthStore, _ count: Int) async throws {
        for start in stride(from: 0, to: count, by: 1000) {
            _ = try await store.save((start..<min(count, start + 1000)).map { drink(at: TimeInterval($0)) })
        }
    }

    /// The copy's drinks and anchor, read by a connection of its own.
    private func contents(of path: String) throws -> (count: Int64, anchor: Int64, integrity: String) {
        let copy = try Database(path: path, readOnly: true)
        defer { copy.close() }
        return (
            try copy.scalar("SELECT count(*) FROM records WHERE deleted = 0") ?? -1,
            try copy.scalar("SELECT max(anchor) FROM records") ?? -1,
            try copy.text("PRAGMA integrity_check") ?? ""
        )
    }

    /// A store of 20,000 drinks and its backup to `copy.sqlite`, held after
    /// the copy's first chunk: the store, its anchor then, the gate that
    /// holds the copy, the copy's path and the backup.
    private func heldBackup(in dir: TemporaryDirectory) async throws -> (
        HealthStore, Int64, HeldGate, String, Task<BackupResult, any Error>
    ) {
        let store = try openStore(dir)
        try await fill(store, 20_000)
        let before = store.statistics().anchor
        let held = HeldGate()
        await store.setAfterBackupChunk { held.pass() }
        let target = dir.url.appendingPathComponent("copy.sqlite").path
        let backup = Task { try await store.backup(to: target) }
        try await held.waitUntilEntered()
        return (store, before, held, target, backup)
    }

    @Test func commitsWhileTheCopyIsHeldAreNotInItAndLeaveItWhole() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (store, before, held, target, result) = try await heldBackup(in: dir)
        // Far more WAL pages than one automatic checkpoint's 1,000: were
        // checkpoints running, they would write the main file under the copy.
        #expect(try await store.autoCheckpointPages() == 0)
        for round in 0..<30 {
            _ = try await store.save((0..<200).map { drink(at: TimeInterval(100_000 + round * 200 + $0)) })
        }
        held.release()
        let backup = try await result.value
        #expect(backup.anchor == before)
        let copy = try contents(of: target)
        #expect(copy.integrity == "ok")
        #expect(copy.count == 20_000 && copy.anchor == before)
        #expect(try await store.autoCheckpointPages() == Int64(HealthStore.autoCheckpointPages))
        #expect(store.statistics().anchor == before + 6000)
        await store.close()
    }

    @Test func aStoreClosedWhileACopyIsHeldLeavesTheMainFileForTheCopy() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (store, before, held, target, result) = try await heldBackup(in: dir)
        _ = try await store.save((0..<5000).map { drink(at: TimeInterval(100_000 + $0)) })
        await store.close()  // would checkpoint the 5,000 into the main file under the copy
        held.release()
        let backup = try await result.value
        #expect(backup.anchor == before)
        let copy = try contents(of: target)
        #expect(copy.integrity == "ok" && copy.count == 20_000)
        // Nothing lost: the WAL left beside the main file is read at the next open.
        let reopened = try openStore(dir)
        #expect(reopened.statistics().anchor == before + 5000)
        await reopened.close()
    }

    @Test func aBackupOverAnExistingFileIsRefusedAndLeavesItAlone() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        try await fill(store, 10)
        let target = dir.url.appendingPathComponent("copy.sqlite").path
        try Data("mine".utf8).write(to: URL(fileURLWithPath: target))
        await #expect(throws: SystemCallError.self) { try await store.backup(to: target) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("mine".utf8))
        // Checkpoints are not left off by a refused backup, nor by a good one.
        _ = try await store.backup(to: dir.url.appendingPathComponent("other.sqlite").path)
        #expect(try await store.autoCheckpointPages() == Int64(HealthStore.autoCheckpointPages))
        await store.close()
    }
}

/// Holds the first thread that passes until released; later passes go through.
final class HeldGate: Sendable {
    private let entered = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)
    private let first = Atomic<Bool>(true)

    func pass() {
        guard first.exchange(false, ordering: .relaxed) else { return }
        entered.signal()
        _ = released.wait(timeout: .now() + 30)
    }

    /// Waits (up to 30 s) without blocking a thread of the cooperative pool,
    /// which the backup being held needs to get this far.
    func waitUntilEntered() async throws {
        for _ in 0..<3000 {
            if entered.wait(timeout: .now()) == .success { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw HeldGateError.neverEntered
    }

    func release() { released.signal() }
}

enum HeldGateError: Error { case neverEntered }
