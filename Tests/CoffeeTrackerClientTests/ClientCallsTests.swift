import CoffeeDomain
import CoffeeLogging
import CoffeeService
import CoffeeTrackerClient
import Foundation
import Testing

/// Every query operation through the Swift client's typed call, against the
/// real service (started here, on sockets of its own), as the Python
/// client's calls are tested: the switch over `QueryOperation` does not
/// build when an operation has no call here.
@Suite("The Swift client's calls against the service", .timeLimit(.minutes(1)))
struct ClientCallsTests {
    /// A service on `ipc://` endpoints in a folder of its own, until `stop`.
    final class Running: Sendable {
        let dir: URL
        let query: String
        let stop: AsyncStream<Int32>.Continuation
        let run: Task<Void, any Error>

        init() async throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-client-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let d = dir.path
            query = "ipc://\(d)/query.sock"
            let json = """
                {"dataDirectory": "\(d)/data", "inboxDirectory": "\(d)/inbox",
                 "ingest": {"bind": ["ipc://\(d)/ingest.sock"]}, "updates": {"bind": ["ipc://\(d)/updates.sock"]},
                 "query": {"bind": ["\(query)"]}, "model": {"halfLifeHours": 5, "timeZone": "UTC"},
                 "alerts": {"dailyLimit": false, "levelOverMg": 0, "sleepThreshold": false, "bedtime": "off"},
                 "log": {"level": "warning"}}
                """
            let configuration = try ConfigurationLoader.parse(Data(json.utf8), file: "c.json", relativeTo: d)
            let (signals, stop) = AsyncStream.makeStream(of: Int32.self)
            self.stop = stop
            let service = CoffeeTrackerService(configuration: configuration, logger: Logger(label: "client-test"))
            run = Task { try await service.run(until: signals) }
        }

        /// A client once the service answers (it binds as it starts); on the caller's thread.
        func client() throws -> QueryClient {
            let deadline = Date(timeIntervalSinceNow: 20)
            while true {
                let client = try QueryClient(endpoint: query, timeout: 1)
                if (try? client.ping()) != nil { return client }
                if Date() > deadline { throw QueryClient.Failure(description: "the service did not answer in 20 s") }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }

        func finish() async {
            stop.yield(15)  // SIGTERM: the drain
            _ = try? await run.value
            try? FileManager.default.removeItem(at: dir)
        }
    }

    @Test func everyOperationHasATypedCallThatTheServiceAnswers() async throws {
        let service = try await Running()
        let espresso = DrinkType.singleEspresso
        let flatWhite = try #require(DrinkType(rawValue: "flatWhite"))
        // The client's calls block: on a thread of their own, off the pool the service runs on.
        let calls: Result<[String], any Error>
        do {
            calls = .success(
                try await blocking { () throws -> [String] in
                    let client = try service.client()
                    let drink = Drink(mgCaffeine: 96, date: Date(timeIntervalSinceNow: -3600), type: espresso)
                    var failures: [String] = []
                    // allCases' order puts reads before `add`: the drink is there first.
                    _ = try client.add([drink])
                    func check(_ holds: Bool, _ what: String) { if !holds { failures.append(what) } }
                    func refusal(_ call: () throws -> Any) -> QueryClient.Refusal? {
                        do {
                            _ = try call()
                            return nil
                        } catch {
                            return error as? QueryClient.Refusal
                        }
                    }
                    for op in QueryOperation.allCases {
                        switch op {
                        case .ping:
                            check(try client.ping().anchor == 1, "ping: the anchor of the first drink")
                        case .add:
                            let again = try client.add([drink])
                            check(again.added == 0 && again.duplicates == 1, "add: a UUID added again adds nothing")
                            check(try client.add([Drink(mgCaffeine: 10, date: Date())]).added == 1, "add: a new drink")
                        case .delete:
                            let other = Drink(mgCaffeine: 64, date: Date(timeIntervalSinceNow: -60))
                            _ = try client.add([other])
                            check(try client.delete([Deletion(uuid: other.uuid)]).deleted == 1, "delete: one live drink")
                        case .changes:
                            let page = try client.changes(since: nil)
                            check(page.added.map(\.uuid) == [drink.uuid], "changes: \(page)")
                        case .model:
                            // 96 mg an hour ago with a five-hour half-life: 96 / 2^(1/5).
                            let mg = try client.model().mgCaffeine
                            check(abs(mg - 96 / pow(2, 0.2)) < 0.5, "model: \(mg) mg")
                        case .stats:
                            let stats = try client.stats()
                            let anchor = try client.ping().anchor
                            check(stats["stored"] == 4 && stats["duplicates"] == 1 && stats.anchor == anchor, "stats: \(stats)")
                        case .backup:
                            let backup = try client.backup(name: "copy.sqlite")
                            check(backup.bytes > 0 && backup.file.hasSuffix("/copy.sqlite"), "backup: \(backup)")
                            check(FileManager.default.fileExists(atPath: backup.file), "backup: the file")
                            check(refusal { try client.backup(name: "../out") }?.field == "name", "backup: a path refused")
                        case .drinks:
                            let drinks = try client.drinks(from: Date(timeIntervalSinceNow: -7200), to: Date())
                            check(drinks.first?.uuid == drink.uuid && drinks.count == 2, "drinks: the live ones, oldest first")
                        case .history:
                            let history = try client.history(by: "day")
                            check(history.by == "day" && history.timeZone == "UTC", "history: by day in UTC")
                            check(history.buckets.reduce(0) { $0 + $1.mg } == 106, "history: 106 mg")
                            check(history.buckets.reduce(0) { $0 + $1.drinks } == 2, "history: two drinks")
                        case .settings:
                            let settings = try client.settings()
                            check(settings.model.halfLifeHours == 5 && settings.timeZoneName == "UTC", "settings: \(settings)")
                        case .putSettings:
                            let after = try client.putSettings([("halfLifeHours", .double(2)), ("bedtime", .string("22:30"))])
                            check(after.model.halfLifeHours == 2 && after.bedtime == "22:30", "putSettings: \(after)")
                            check(try client.settings() == after, "putSettings: read back")
                            let refused = refusal { try client.putSettings([("timeZone", .string("Berlin"))]) }
                            check(refused?.field == "settings.timeZone", "putSettings: a zone that is no IANA name refused")
                        case .catalogue:
                            let entry = try client.catalogue()["singleEspresso"]
                            check(
                                entry?.mgCaffeine == espresso.defaultServingMg && entry?.retired == false,
                                "catalogue: singleEspresso"
                            )
                        case .putCatalogue:
                            let after = try client.putCatalogue("flatWhite", mgCaffeine: 130)
                            check(
                                after["flatWhite"] == .init(type: flatWhite, mgCaffeine: 130, retired: false),
                                "putCatalogue: added")
                            check(
                                try client.putCatalogue("flatWhite", retired: true)["flatWhite"]?.retired == true,
                                "putCatalogue: retired")
                            check(try client.catalogue().anchor == after.anchor + 1, "putCatalogue: a commit each")
                        case .pushKey:
                            let (key, again) = (try client.pushKey(), try client.pushKey())
                            check(Base64URL.decode(key)?.count == 65 && key == again, "pushKey: \(key)")
                        case .pushSubscribe, .pushUnsubscribe, .pushSubscriptions:
                            // A browser's key: any point of P-256 (the service's own will do).
                            let p256dh = try client.pushKey()
                            let auth = Base64URL.encode([UInt8](repeating: 7, count: 16))
                            let endpoint = "https://push.example.net/\(op)"
                            let id = try client.pushSubscribe(endpoint: endpoint, p256dh: p256dh, auth: auth)
                            check(try client.pushSubscriptions().contains { $0 == (id, endpoint) }, "\(op): listed")
                            let refused = refusal { try client.pushSubscribe(endpoint: endpoint, p256dh: auth, auth: auth) }
                            check(refused?.field == "subscription.keys.p256dh", "\(op): a key that is no point refused")
                            check(try client.pushUnsubscribe(id: id), "\(op): removed")
                            check(try !client.pushUnsubscribe(id: id), "\(op): removed once")
                            check(try client.pushSubscriptions().isEmpty, "\(op): none left")
                        }
                    }
                    return failures
                })
        } catch {
            calls = .failure(error)
        }
        await service.finish()  // drained and its folder gone, whatever the calls did
        #expect(try calls.get() == [])
    }
}

/// Runs a client's blocking socket calls on a thread of their own, off the cooperative pool.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
