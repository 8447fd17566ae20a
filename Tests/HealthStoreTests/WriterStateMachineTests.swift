import Testing

@testable import HealthStore

@Suite("WriterStateMachine: the store's writer without SQLite or threads", .timeLimit(.minutes(2)))
struct WriterStateMachineTests {
    typealias Machine = WriterStateMachine<String, String>

    static func entry(_ name: String, changes: Int = 1, hold: Bool = false) -> Machine.Entry {
        Machine.Entry(changes: changes, holdOnFault: hold, waiter: name)
    }

    static func taken(_ next: Machine.NextCommit) -> [String] {
        guard case .commit(let entries, _) = next else { return [] }
        return entries.map(\.waiter)
    }

    @Test func theFirstBatchSchedulesACommitAndTheRestJoinIt() {
        var writer = Machine(changeLimit: 100)
        #expect(writer.submit(Self.entry("a")) == .scheduleCommit)
        #expect(writer.submit(Self.entry("b")) == .none)
        #expect(writer.submit(Self.entry("c")) == .none)
        guard case .commit(let entries, let another) = writer.scheduledCommitRuns() else {
            Issue.record("a scheduled commit should take the queued batches")
            return
        }
        #expect(entries.map(\.waiter) == ["a", "b", "c"])
        #expect(!another)
        #expect(writer.isEmpty)
        #expect(writer.submit(Self.entry("d")) == .scheduleCommit)  // after a commit, the next batch schedules the next
    }

    @Test func aCommitStopsAtTheChangeLimitAndSchedulesAnotherForTheRest() {
        var writer = Machine(changeLimit: 10)
        for i in 0..<4 { _ = writer.submit(Self.entry("\(i)", changes: 4)) }
        let first = writer.scheduledCommitRuns()
        #expect(Self.taken(first) == ["0", "1"])  // 8 changes; a third batch would make 12
        guard case .commit(_, scheduleAnother: true) = first else {
            Issue.record("what is left needs a commit scheduled")
            return
        }
        #expect(writer.submit(Self.entry("4")) == .none)  // joins the scheduled commit
        #expect(Self.taken(writer.scheduledCommitRuns()) == ["2", "3", "4"])
    }

    @Test func aBatchLargerThanTheLimitStillCommitsAlone() {
        var writer = Machine(changeLimit: 10)
        _ = writer.submit(Self.entry("big", changes: 50))
        _ = writer.submit(Self.entry("small"))
        #expect(Self.taken(writer.scheduledCommitRuns()) == ["big"])
        #expect(Self.taken(writer.scheduledCommitRuns()) == ["small"])
        #expect(Self.taken(writer.scheduledCommitRuns()) == [])
    }

    @Test func aFailedSharedCommitRetriesEachBatchAloneAndALoneFailureFailsItsWaiter() {
        var writer = Machine(changeLimit: 100)
        _ = writer.submit(Self.entry("good"))
        _ = writer.submit(Self.entry("bad"))
        guard case .commit(let entries, _) = writer.scheduledCommitRuns(),
            case .retryEachAlone(let alone) = writer.failed(entries)
        else {
            Issue.record("a shared commit's failure should retry each batch alone")
            return
        }
        #expect(alone.map(\.waiter) == ["good", "bad"])
        guard case .fail(let entry) = writer.failed([alone[1]]) else {
            Issue.record("a lone batch's failure should fail its waiter")
            return
        }
        #expect(entry.waiter == "bad")
    }

    @Test func aStorageFaultHoldsTheBussBatchesInOrderAndRefusesEveryoneElse() {
        var writer = Machine(changeLimit: 100)
        _ = writer.submit(Self.entry("bus1", hold: true))
        _ = writer.submit(Self.entry("query1"))
        let taken = writer.scheduledCommitRuns()
        _ = writer.submit(Self.entry("bus2", hold: true))
        _ = writer.submit(Self.entry("query2"))
        guard case .commit(let entries, _) = taken else {
            Issue.record("nothing taken")
            return
        }
        let action = writer.storageFailed(entries, reason: "disk is full")
        #expect(action.began)
        #expect(action.refused.map(\.waiter) == ["query1", "query2"])
        #expect(writer.pending.map(\.waiter) == ["bus1", "bus2"])
        #expect(writer.phase == .faulted(reason: "disk is full"))
        // In the fault: a caller is refused at once, the bus's batch waits; nothing commits but the retry.
        #expect(writer.submit(Self.entry("query3")) == .refuse(.unavailable("disk is full")))
        #expect(writer.submit(Self.entry("bus3", hold: true)) == .none)
        #expect(Self.taken(writer.scheduledCommitRuns()) == [])
        guard case .commit(let held) = writer.retry() else {
            Issue.record("the retry should take the held batches")
            return
        }
        #expect(held.map(\.waiter) == ["bus1", "bus2", "bus3"])
        // It fails again: held again, in order, and no second retry loop.
        #expect(!writer.storageFailed(held, reason: "disk is full").began)
        guard case .commit(let again) = writer.retry() else {
            Issue.record("held batches lost")
            return
        }
        #expect(again.map(\.waiter) == ["bus1", "bus2", "bus3"])
        guard case .leftFault(was: "disk is full", held: 0, waiters: []) = writer.committed(wroteSomething: true) else {
            Issue.record("a commit in the fault should end it")
            return
        }
        #expect(writer.phase == .writing)
        #expect(writer.submit(Self.entry("query4")) == .scheduleCommit)
    }

    @Test func aFaultWithNothingHeldIsProbedAndACommitOfDuplicatesEndsNothing() {
        var writer = Machine(changeLimit: 100)
        _ = writer.storageFailed([], reason: "I/O error")
        guard case .probe = writer.retry() else {
            Issue.record("nothing held: the retry probes")
            return
        }
        guard case .none = writer.committed(wroteSomething: false) else {
            Issue.record("a commit of duplicates alone ends no fault")
            return
        }
        #expect(writer.fault == "I/O error")
        guard case .leftFault(was: "I/O error", _, _) = writer.committed(wroteSomething: true) else {
            Issue.record("a write ends the fault")
            return
        }
        guard case .stop = writer.retry() else {
            Issue.record("not in a fault: the retry stops")
            return
        }
    }

    @Test func aLeaderCommitsOnceAndHandsTheRestToTheStoresThread() {
        var writer = Machine(changeLimit: 3)
        #expect(writer.beginLeading() == .lead)
        for name in ["a", "b", "c", "d"] { #expect(writer.submit(Self.entry(name, changes: 2)) == .none) }
        guard case .commit(let entries, scheduleAnother: false) = writer.scheduledCommitRuns() else {
            Issue.record("the leader commits, and schedules nothing while it leads")
            return
        }
        #expect(entries.map(\.waiter) == ["a"])
        #expect(writer.endLeading() == .scheduleCommit)
        #expect(writer.submit(Self.entry("e")) == .none)  // the commit handed over will take it
        #expect(Self.taken(writer.scheduledCommitRuns()) == ["b"])
    }

    @Test func aDrainGivesTheHeldBatchesOneMoreTryAndClosesWithWhatIsLeft() {
        var writer = Machine(changeLimit: 100)
        _ = writer.submit(Self.entry("bus1", hold: true))
        guard case .commit(let entries, _) = writer.scheduledCommitRuns() else {
            Issue.record("nothing taken")
            return
        }
        _ = writer.storageFailed(entries, reason: "disk is full")
        #expect(writer.startDraining() == .cancelRetry)
        #expect(Self.taken(writer.scheduledCommitRuns()) == ["bus1"])
        // The storage still fails: the drain stops trying, and close hands the batch back.
        _ = writer.storageFailed(entries, reason: "disk is full")
        #expect(Self.taken(writer.scheduledCommitRuns()) == [])
        let closed = writer.close()
        #expect(closed.left.map(\.waiter) == ["bus1"])
        #expect(closed.fault == "disk is full")
        #expect(writer.submit(Self.entry("late", hold: true)) == .refuse(.closed))
    }

    // MARK: - What once lived beside the machine, one test each

    @Test func aJobScheduledBeforeAFaultTakesNothingAndTheFaultsEndHandsTheHeldToAFlush() {
        var writer = Machine(changeLimit: 100)
        #expect(writer.submit(Self.entry("bus1", hold: true)) == .scheduleCommit)
        let began = writer.storageFailed([], reason: "disk is full")
        #expect(began.began && began.refused.isEmpty)
        #expect(Self.taken(writer.scheduledCommitRuns()) == [])  // the job queued before the fault
        guard case .leftFault(_, held: 1, _) = writer.committed(wroteSomething: true) else {
            Issue.record("the fault should end with one batch held")
            return
        }
        #expect(writer.flush()?.map(\.waiter) == ["bus1"])
        #expect(writer.submit(Self.entry("next")) == .scheduleCommit)  // nothing is scheduled after the fault
    }

    @Test func aLeaderInAFaultCommitsNothingAndHandsNothingOver() {
        var writer = Machine(changeLimit: 100)
        _ = writer.storageFailed([], reason: "I/O error")
        #expect(writer.beginLeading() == .lead)
        #expect(writer.isLeading)
        #expect(writer.submit(Self.entry("bus", hold: true)) == .none)
        #expect(writer.flush() == nil)
        #expect(writer.endLeading() == .none)
        #expect(!writer.isLeading)
        #expect(writer.pending.map(\.waiter) == ["bus"])
    }

    @Test func whoeverWaitsForAWritableStoreIsHeldByTheFaultAndHandedBackAtItsEndOrAtTheClose() {
        var writer = Machine(changeLimit: 100)
        guard case .resume("now") = writer.awaitWritable("now") else {
            Issue.record("a writable store lets a waiter go on at once")
            return
        }
        _ = writer.storageFailed([], reason: "disk is full")
        guard case .wait = writer.awaitWritable("inbox") else {
            Issue.record("a fault holds the waiter")
            return
        }
        #expect(writer.recoveryWaiters == 1)
        guard case .leftFault(_, _, waiters: ["inbox"]) = writer.committed(wroteSomething: true) else {
            Issue.record("the fault's end hands the waiter back")
            return
        }
        #expect(writer.recoveryWaiters == 0)
        _ = writer.storageFailed([], reason: "disk is full")
        _ = writer.awaitWritable("late")
        _ = writer.startDraining()
        #expect(writer.close().waiters == ["late"])
    }

    @Test func aFaultStartsOneRetryWhichTheFaultsEndOrADrainStops() {
        var writer = Machine(changeLimit: 100)
        #expect(!writer.isRetrying)
        #expect(writer.storageFailed([], reason: "disk is full").began)
        #expect(writer.isRetrying)
        #expect(!writer.storageFailed([], reason: "disk is still full").began)  // one retry per fault
        #expect(writer.fault == "disk is still full")
        _ = writer.committed(wroteSomething: true)
        #expect(!writer.isRetrying)
        guard case .stop = writer.retry() else {
            Issue.record("the retry stops once the fault ended")
            return
        }
        #expect(writer.startDraining() == .none)  // no fault, no retry to cancel
    }

    @Test func aStreamIsAdmittedOnlyWhileTheStoreWrites() {
        var writer = Machine(changeLimit: 100)
        #expect(writer.admitsStream() == nil)
        _ = writer.storageFailed([], reason: "disk is full")
        #expect(writer.admitsStream() == .unavailable("disk is full"))
        _ = writer.startDraining()
        #expect(writer.admitsStream() == .closed)
        _ = writer.close()
        #expect(writer.admitsStream() == .closed)
    }

    // MARK: - Random sequences against a reference model

    @Test(arguments: 0..<400)
    func randomSequencesAgreeWithTheReferenceModel(seed: Int) throws {
        var run = WriterSimulation(seed: UInt64(seed))
        try run.play(steps: 80)
    }
}

/// The store's side of the machine, simulated: a queue of scheduled jobs on
/// "the store's thread", a disk that fills and frees, leaders, retries and a
/// close; every action the machine returns is carried out as `HealthStore`
/// does. Beside it, a reference model written the plainest way: a list of
/// waiting batches and a fault flag. After every step the two must agree,
/// and no batch may wait with nothing on its way to commit it.
struct WriterSimulation {
    typealias Machine = WriterStateMachine<Int, Int>

    enum Outcome: Equatable {
        case committed
        case refusedUnavailable
        case refusedClosed
        case failed
    }

    var rng: SplitMix
    var machine = Machine(changeLimit: 6)
    var jobs = 0  // commits scheduled on the store's thread
    var retrying = false
    var diskFull = false
    var nextID = 0
    var hold: [Int: Bool] = [:]
    var poison: Set<Int> = []
    var outcomes: [Int: Outcome] = [:]
    var committedOrder: [Int] = []
    // The reference model.
    var modelPending: [Int] = []
    var modelFaulted = false
    var closed = false

    init(seed: UInt64) { rng = SplitMix(state: seed &* 0x9E37_79B9_7F4A_7C15 | 1) }

    mutating func play(steps: Int) throws {
        for _ in 0..<steps {
            switch rng.next() % 10 {
            case 0, 1, 2: submit()
            case 3, 4: runJob()
            case 5: lead()
            case 6: diskFull.toggle()
            case 7: if retrying { retryTick() }
            case 8: submit(poisoned: true)
            default: runJob()
            }
            try checkAgreement()
        }
        // Close: with the disk back (every batch must end committed or told
        // earlier), or still full (the held ones are handed back, never lost).
        if rng.next() % 2 == 0 { diskFull = false }
        let diskFullAtClose = diskFull
        if machine.startDraining() == .cancelRetry { retrying = false }
        while let entries = machine.flush() { perform(entries) }
        let left = machine.close().left
        closed = true
        for entry in left { resolve(entry.waiter, .refusedClosed) }
        if !diskFullAtClose {
            #expect(left.isEmpty, "a drain with the disk back left batches uncommitted: \(left.map(\.waiter))")
        }
        for id in 0..<nextID {
            #expect(outcomes[id] != nil, "batch \(id) was never answered")
            if hold[id] == true, outcomes[id] == .refusedUnavailable {
                Issue.record("the bus's batch \(id) was refused in a fault instead of held")
            }
        }
        #expect(committedOrder == committedOrder.sorted(), "batches committed out of order: \(committedOrder)")
    }

    mutating func submit(poisoned: Bool = false) {
        let id = nextID
        nextID += 1
        let holds = rng.next() % 2 == 0
        hold[id] = holds
        if poisoned { poison.insert(id) }
        let entry = Machine.Entry(changes: Int(rng.next() % 5) + 1, holdOnFault: holds, waiter: id)
        // The model first: refused when faulted and not held, else queued.
        let modelRefuses = modelFaulted && !holds
        switch machine.submit(entry) {
        case .scheduleCommit:
            jobs += 1
            #expect(!modelRefuses)
        case .none:
            #expect(!modelRefuses)
        case .refuse(let refusal):
            #expect(modelRefuses, "batch \(id) refused (\(refusal)) though the model queues it")
            resolve(id, .refusedUnavailable)
            return
        }
        modelPending.append(id)
    }

    mutating func runJob() {
        guard jobs > 0 else { return }
        jobs -= 1
        guard case .commit(let entries, let another) = machine.scheduledCommitRuns() else { return }
        if another { jobs += 1 }
        perform(entries)
    }

    /// A producer's thread finds the store idle (no job queued) and leads.
    mutating func lead() {
        guard jobs == 0 else { return }
        guard machine.beginLeading() == .lead else { return }
        #expect(machine.isLeading)
        for _ in 0..<Int(rng.next() % 4) { submit() }
        if let entries = machine.flush() { perform(entries) }
        if machine.endLeading() == .scheduleCommit { jobs += 1 }
    }

    mutating func retryTick() {
        switch machine.retry() {
        case .stop: retrying = false
        case .commit(let entries): perform(entries)
        case .probe: if !diskFull { committed(wroteSomething: true) }
        }
    }

    /// One transaction of `entries`, as `HealthStore.commitEntries` runs it.
    mutating func perform(_ entries: [Machine.Entry]) {
        let ids = entries.map(\.waiter)
        // Taken in order, from the front, within the limit (or one batch alone).
        #expect(Array(modelPending.prefix(ids.count)) == ids, "took \(ids), the model's queue is \(modelPending)")
        #expect(ids.count == 1 || entries.map(\.changes).reduce(0, +) <= machine.changeLimit)
        modelPending.removeFirst(min(ids.count, modelPending.count))
        if diskFull {
            let action = machine.storageFailed(entries, reason: "disk is full")
            if action.began { retrying = true }
            if !closed, case .draining = machine.phase {
                modelPending = ids + modelPending
            } else {
                let refusedByModel = (ids + modelPending).filter { hold[$0] != true }
                modelPending = (ids + modelPending).filter { hold[$0] == true }
                #expect(action.refused.map(\.waiter) == refusedByModel)
                modelFaulted = true
            }
            for entry in action.refused { resolve(entry.waiter, .refusedUnavailable) }
            return
        }
        if ids.contains(where: poison.contains) {
            switch machine.failed(entries) {
            case .fail(let entry): resolve(entry.waiter, .failed)
            case .retryEachAlone(let alone):
                modelPending = ids + modelPending  // each goes through `perform` again
                for i in alone.indices {
                    let rest = Array(alone[i...])
                    let next = machine.commitAlone(alone[i...])
                    if case .settled(let action, _) = next {
                        // The storage failed meanwhile: the rest are settled as in a fault.
                        modelPending.removeFirst(rest.count)
                        let refusedByModel = (rest.map(\.waiter) + modelPending).filter { hold[$0] != true }
                        modelPending = (rest.map(\.waiter) + modelPending).filter { hold[$0] == true }
                        #expect(action.refused.map(\.waiter) == refusedByModel)
                        for entry in action.refused { resolve(entry.waiter, .refusedUnavailable) }
                        break
                    }
                    guard case .commit(let entry) = next else { continue }
                    #expect(entry.waiter == rest[0].waiter)
                    perform([entry])
                }
            }
            return
        }
        for id in ids {
            resolve(id, .committed)
            committedOrder.append(id)
        }
        committed(wroteSomething: true)
    }

    mutating func committed(wroteSomething: Bool) {
        guard case .leftFault = machine.committed(wroteSomething: wroteSomething) else { return }
        modelFaulted = false
        retrying = false
        // `HealthStore.leftFault`: what is queued commits now.
        while let entries = machine.flush() { perform(entries) }
    }

    mutating func resolve(_ id: Int, _ outcome: Outcome) {
        #expect(outcomes[id] == nil, "batch \(id) answered twice: \(outcomes[id].map { "\($0)" } ?? "") then \(outcome)")
        outcomes[id] = outcome
    }

    func checkAgreement() throws {
        #expect(machine.pending.map(\.waiter) == modelPending, "the machine's queue differs from the model's")
        #expect((machine.fault != nil) == modelFaulted, "the machine's fault differs from the model's")
        // Liveness: a batch waiting while the store writes has a commit on its way.
        if case .writing = machine.phase, !machine.isEmpty {
            try #require(jobs > 0, "batches \(modelPending) wait with no commit scheduled")
        }
        if modelFaulted { #expect(retrying, "a fault with no retry running") }
        #expect(machine.isRetrying == (retrying && modelFaulted), "the machine's retry differs from the simulation's")
        #expect(!machine.isLeading, "a leader left leading")
    }
}

struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
