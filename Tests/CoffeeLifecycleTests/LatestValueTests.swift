import CoffeeLifecycle
import Testing

/// The mailbox every producer-to-task hand-over uses: the newest wins, a
/// ring while busy is kept once, and the wait ends on finish or cancel.
@Suite("The newest value and its doorbell", .timeLimit(.minutes(1)))
struct LatestValueTests {
    @Test func aBurstLeavesTheNewestAndOneRing() async {
        let latest = LatestValue<Int?>(nil)
        for value in 1...100 { latest.set(value) }
        #expect(await latest.next())
        #expect(latest.take(reset: nil) == 100)
        #expect(latest.value == nil)
        // The hundred rings were one: nothing more is waiting.
        latest.finish()
        #expect(await latest.next() == false)
    }

    @Test func aWaitingConsumerWakesWithTheNewest() async {
        let latest = LatestValue(0)
        let seen = Task { () -> [Int] in
            var seen: [Int] = []
            while await latest.next() {
                let value = latest.value
                seen.append(value)
                if value == 3 { break }
            }
            return seen
        }
        // Each set after the consumer has taken the previous one.
        for value in 1...3 {
            latest.set(value)
            let deadline = ContinuousClock.now + .seconds(5)
            while latest.value != value, ContinuousClock.now < deadline { await Task.yield() }
            #expect(latest.value == value, "the set value is the one read")
            try? await Task.sleep(for: .milliseconds(20))
        }
        latest.finish()  // a consumer that never saw 3 ends here, not at the time limit
        let values = await seen.value
        #expect(values.last == 3)
        #expect(values == values.sorted(), "never an older value after a newer one: \(values)")
    }

    @Test func producersOnOtherThreadsNeverLoseTheNewest() async {
        let latest = LatestValue<[Int]>([])
        let producers = 4
        let each = 2_000
        await withTaskGroup(of: Void.self) { group in
            for producer in 0..<producers {
                group.addTask { for i in 0..<each { latest.update { $0.append(producer * each + i) } } }
            }
            group.addTask {
                var taken: [Int] = []
                while taken.count < producers * each, await latest.next() { taken += latest.take(reset: []) }
                // Every amendment once, and each producer's in its order.
                #expect(taken.count == producers * each)
                for producer in 0..<producers {
                    let mine = taken.filter { $0 / each == producer }
                    #expect(mine == Array(producer * each..<(producer + 1) * each))
                }
            }
        }
    }

    @Test func anAmendmentWaitsForTheNextRing() async {
        let latest = LatestValue<[Int]>([])
        latest.amend { $0.append(1) }  // a retry kept for later: no ring
        let woke = Task { await latest.next() }
        try? await Task.sleep(for: .milliseconds(50))
        latest.update { $0.append(2) }
        #expect(await woke.value)
        #expect(latest.take(reset: []) == [1, 2])
        latest.amend { $0.append(3) }
        latest.finish()
        #expect(await latest.next() == false, "an amendment alone never wakes the consumer")
        #expect(latest.value == [3])
    }

    @Test func finishAndCancelEndTheWait() async {
        let finished = LatestValue(0)
        let waiting = Task { await finished.next() }
        try? await Task.sleep(for: .milliseconds(20))
        finished.finish()
        #expect(await waiting.value == false)
        finished.set(1)  // after finish: kept, but no ring
        #expect(finished.value == 1)
        #expect(await finished.next() == false)

        let cancelled = LatestValue(0)
        let wait = Task { await cancelled.next() }
        try? await Task.sleep(for: .milliseconds(20))
        wait.cancel()
        #expect(await wait.value == false)
    }
}
