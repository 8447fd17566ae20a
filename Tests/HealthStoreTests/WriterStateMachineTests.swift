import Testing

@testable import HealthStore

@Suite("WriterStateMachine: the store's writer without SQLite or threads", .timeLimit(.minutes(2)))
struct WriterStateMachineTests {
    typealias Machine = WriterStateMachine<String>

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
        guard case .commit(let entries, let another) = writer.nextCommit() else {
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
        let first = writer.nextCommit()
        #expect(Self.taken(first) == ["0", "1"])  // 8 changes; a third batch would make 12
        guard case .commit(_, scheduleAnother: true) = first else {
            Issue.record("what is left needs a commit scheduled")
            return
        }
        #expect(writer.submit(Self.entry("4")) == .none)  // joins the scheduled commit
        #expect(Self.taken(writer.nextCommit()) == ["2", "3", "4"])
    }

    @Test func aBatchLargerThanTheLimitStillCommitsAlone() {
        var writer = Machine(changeLimit: 10)
        _ = writer.submit(Self.entry("big", changes: 50))
        _ = writer.submit(Self.entry("small"))
        #expect(Self.taken(writer.nextCommit()) == ["big"])
        #expect(Self.taken(writer.nextCommit()) == ["small"])
        #expect(Self.taken(writer.nextCommit()) == [])
    }

    @Test func aFailedSharedCommitRetriesEachBatchAloneAndALoneFailureFailsItsWaiter() {
        var writer = Machine(changeLimit: 100)
        _ = writer.submit(Self.entry("good"))
        _ = writer.submit(Self.entry("bad"))
        guard case .commit(let entries, _) = writer.nextCommit(),
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
        let taken = writer.nextCommit()
        _ = writer.submit(Self.entry("bus2", hold: true))
        _ = writer.submit(Self.entry("query2"))
        guard case .commit(let entries, _) = taken else {
            Issue.record("nothing taken")
            return
        }
        let action = writer.storageFailed(entries, reason: "disk is full")
        #expect(action.startRetrying)
        #expect(action.refused.map(\.waiter) == ["query1", "query2"])
        #expect(writer.pending.map(\.waiter) == ["bus1", "bus2"])
        #expect(writer.state == .faulted(reason: "disk is full"))
        // In the fault: a caller is refused at once, the bus's batch waits; nothing commits but the retry.
        #expect(writer.submit(Self.entry("query3")) == .refuse(.unavailable("disk is full")))
        #expect(writer.submit(Self.entry("bus3", hold: true)) == .none)
        #expect(Self.taken(writer.nextCommit()) == [])
        guard case .commit(let held) = writer.retry() else {
            Issue.record("the retry should take the held batches")
            return
        }
        #expect(held.map(\.waiter) == ["bus1", "bus2", "bus3"])
        // It fails again: held again, in order, and no second retry loop.
        #expect(!writer.storageFailed(held, reason: "disk is full").startRetrying)
        guard case .commit(let again) = writer.retry() else {
            Issue.record("held batches lost")
            return
        }
        #expect(again.map(\.waiter) == ["bus1", "bus2", "bus3"])
        #expect(writer.committed(wroteSomething: true) == .leftFault(was: "disk is full"))
        #expect(writer.state == .writing)
        #expect(writer.submit(Self.entry("query4")) == .scheduleCommit)
    }

    @Test func aFaultWithNothingHeldIsProbedAndACommitOfDuplicatesEndsNothing() {
        var writer = Machine(changeLimit: 100)
        _ = writer.storageFailed([], reason: "I/O error")
        guard case .probe = writer.retry() else {
            Issue.record("nothing held: the retry probes")
            return
        }
        #expect(writer.committed(wroteSomething: false) == .none)
        #expect(writer.fault == "I/O error")
        #expect(writer.committed(wroteSomething: true) == .leftFault(was: "I/O error"))
        guard case .none = writer.retry() else {
            Issue.record("not in a fault: the retry stops")
            return
        }
    }

    @Test func aLeaderCommitsOnceAndHandsTheRestToTheStoresThread() {
        var writer = Machine(changeLimit: 3)
        writer.beginLeading()
        for name in ["a", "b", "c", "d"] { #expect(writer.submit(Self.entry(name, changes: 2)) == .none) }
        guard case .commit(let entries, scheduleAnother: false) = writer.nextCommit() else {
            Issue.record("the leader commits, and schedules nothing while it leads")
            return
        }
        #expect(entries.map(\.waiter) == ["a"])
        #expect(writer.endLeading() == .scheduleCommit)
        #expect(writer.submit(Self.entry("e")) == .none)  // the commit handed over will take it
        #expect(Self.taken(writer.nextCommit()) == ["b"])
    }

    @Test func aDrainGivesTheHeldBatchesOneMoreTryAndClosesWithWhatIsLeft() {
        var writer = Machine(changeLimit: 100)
        _ = writer.submit(Self.entry("bus1", hold: true))
        guard case .commit(let entries, _) = writer.nextCommit() else {
            Issue.record("nothing taken")
            return
        }
        _ = writer.storageFailed(entries, reason: "disk is full")
        writer.startDraining()
        #expect(Self.taken(writer.nextCommit()) == ["bus1"])
        // The storage still fails: the drain stops trying, and close hands the batch back.
        _ = writer.storageFailed(entries, reason: "disk is full")
        #expect(Self.taken(writer.nextCommit()) == [])
        let closed = writer.close()
        #expect(closed.left.map(\.waiter) == ["bus1"])
        #expect(closed.fault == "disk is full")
        #expect(writer.submit(Self.entry("late", hold: true)) == .refuse(.closed))
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
    typealias Machine = WriterStateMachine<Int>

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
        machine.startDraining()
        while case .commit(let entries, _) = machine.nextCommit() { perform(entries) }
        let (left, _) = machine.close()
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
        guard case .commit(let entries, let another) = machine.nextCommit() else { return }
        if another { jobs += 1 }
        perform(entries)
    }

    /// A producer's thread finds the store idle (no job queued) and leads.
    mutating func lead() {
        guard jobs == 0 else { return }
        machine.beginLeading()
        for _ in 0..<Int(rng.next() % 4) { submit() }
        if case .commit(let entries, _) = machine.nextCommit() { perform(entries) }
        if machine.endLeading() == .scheduleCommit { jobs += 1 }
    }

    mutating func retryTick() {
        switch machine.retry() {
        case .none: retrying = false
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
            if action.startRetrying { retrying = true }
            if !closed, case .draining = machine.state {
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
                for (i, entry) in alone.enumerated() {
                    if machine.fault != nil {
                        // The storage failed meanwhile: the rest are settled as in a fault.
                        let rest = Array(alone[i...])
                        modelPending.removeFirst(rest.count)
                        let action = machine.storageFailed(rest, reason: "disk is full")
                        let refusedByModel = (rest.map(\.waiter) + modelPending).filter { hold[$0] != true }
                        modelPending = (rest.map(\.waiter) + modelPending).filter { hold[$0] == true }
                        #expect(action.refused.map(\.waiter) == refusedByModel)
                        for entry in action.refused { resolve(entry.waiter, .refusedUnavailable) }
                        break
                    }
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
        while case .commit(let entries, _) = machine.nextCommit() { perform(entries) }
    }

    mutating func resolve(_ id: Int, _ outcome: Outcome) {
        #expect(outcomes[id] == nil, "batch \(id) answered twice: \(outcomes[id].map { "\($0)" } ?? "") then \(outcome)")
        outcomes[id] = outcome
    }

    func checkAgreement() throws {
        #expect(machine.pending.map(\.waiter) == modelPending, "the machine's queue differs from the model's")
        #expect((machine.fault != nil) == modelFaulted, "the machine's fault differs from the model's")
        // Liveness: a batch waiting while the store writes has a commit on its way.
        if case .writing = machine.state, !machine.isEmpty {
            try #require(jobs > 0, "batches \(modelPending) wait with no commit scheduled")
        }
        if modelFaulted { #expect(retrying, "a fault with no retry running") }
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
