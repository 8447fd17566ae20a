import CoffeeDomain
import CoffeeTrackerClient
import Foundation
import Testing

/// `Changes(json:)`, the follower's reading of a `changes` message in place,
/// gives what the tree's reading (`Changes(_: JSONValue)`) gives from the
/// same bytes, and names what it cannot read.
@Suite("Changes read from bytes, as the tree reads them", .timeLimit(.minutes(1)))
struct ChangesReadingTests {
    func bothReadings(_ bytes: [UInt8]) throws -> (inPlace: Changes, tree: Changes) {
        let inPlace = try bytes.withUnsafeBytes { raw throws(WireFormat.DecodingError) in try Changes(json: raw) }
        return (inPlace, try Changes(JSONReader.parse(Data(bytes))))
    }

    @Test func messagesOfEveryShapeReadTheSame() throws {
        var seed: UInt64 = 7
        func next() -> UInt64 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return seed >> 11
        }
        for round in 0..<200 {
            let added = (0..<Int(next() % 12)).map { i in
                Drink(
                    mgCaffeine: Double(next() % 100_000) / 100, date: Date(timeIntervalSince1970: Double(next() % 2_000_000_000)),
                    version: Int64(next() % 5) + 1,
                    type: i % 2 == 0 ? DrinkType.builtIn[Int(next() % UInt64(DrinkType.builtIn.count))] : nil,
                    source: i % 3 == 0 ? "bus \(round) \"quoted\" ☕ \\ é" : nil)
            }
            let deleted = (0..<Int(next() % 6)).map { _ in Tombstone(uuid: UUID(), version: Int64(next() % 9) + 1) }
            let anchors = (0..<(added.count + deleted.count)).map { Int64(round * 100 + $0 + 1) }
            let identity = round % 2 == 0 ? StoreIdentity(store: UUID(), epoch: Int64(round + 1)) : nil
            // Now and then the rows beside the drinks (§15, "In the feed").
            var kept = KeptRows()
            if round % 3 == 0 {
                kept.settings = [.init(scope: "person", name: "timeZone", value: #""Europe/Berlin""#, anchor: Int64(round))]
                kept.ruleStates = [.init(OutboxRuleState(rule: "bedtime", active: true, key: "2026-12-05", turns: 3), anchor: 9)]
                let item = OutboxItem(
                    id: "A\(round)", receiver: "ntfy", body: #"{"rule":"bedtime","n":[1,2]}"#, createdMs: 77, nextMs: 77)
                kept.alerts = [.init(item, settled: round % 2 == 0, anchor: 9)]
            }
            let bytes = WireFormat.changesMessage(
                identity: identity, anchor: anchors.last ?? Int64(round), previousAnchor: Int64(round * 100), added: added,
                addedAnchors: Array(anchors.prefix(added.count)), deleted: deleted,
                deletedAnchors: Array(anchors.dropFirst(added.count)), kept: kept)
            let (inPlace, tree) = try bothReadings(bytes)
            #expect(inPlace == tree)
            #expect(inPlace.kept == kept)
            #expect(inPlace.added == added && inPlace.deleted == deleted)
            #expect(inPlace.addedAnchors + inPlace.deletedAnchors == anchors)
            #expect(inPlace.previousAnchor == Int64(round * 100) && !inPlace.hasMore)
            #expect(inPlace.identity == identity)
        }
    }

    @Test func escapedTextAndRepliesReadTheSame() throws {
        let uuid = "E7F3A2B1-0C4D-4E5F-8A9B-1C2D3E4F5A6B"
        let reply = #"""
            {"anchor": 12, "hasMore": true, "added": [{"uuid": "\u0045\#(uuid.dropFirst())", "mgCaffeine": 64,
             "date": "2026-12-01T08:00:00\u002B01:00", "version": 2, "type": "single\u0045spresso", "source": null,
             "anchor": 11, "extra": [1, {"a": 2}]}], "deleted": [{"uuid": "\#(uuid.lowercased())", "version": 3, "anchor": 12}]}
            """#
        let (inPlace, tree) = try bothReadings(Array(reply.utf8))
        #expect(inPlace == tree)
        #expect(inPlace.hasMore && inPlace.previousAnchor == nil && inPlace.anchor == 12)
        #expect(inPlace.added.first?.type == .singleEspresso && inPlace.added.first?.version == 2)
        #expect(inPlace.deleted.first?.uuid == UUID(uuidString: uuid))
    }

    @Test func whatCannotBeReadIsNamed() {
        func error(_ text: String) -> WireFormat.DecodingError? {
            do {
                _ = try Array(text.utf8).withUnsafeBytes { raw throws(WireFormat.DecodingError) in try Changes(json: raw) }
                return nil
            } catch let error as WireFormat.DecodingError {
                return error
            } catch {
                Issue.record("not a DecodingError: \(error)")
                return nil
            }
        }
        let drink = #""uuid":"E7F3A2B1-0C4D-4E5F-8A9B-1C2D3E4F5A6B","mgCaffeine":5,"date":"2026-12-01T08:00:00Z""#
        #expect(error(#"{"added":[],"deleted":[]}"#) == WireFormat.DecodingError("missing \"anchor\""))
        #expect(error(#"{"anchor":1,"added":[{\#(drink)}],"deleted":[]}"#) == WireFormat.DecodingError("missing \"anchor\""))
        #expect(
            error(#"{"anchor":1,"added":[{"uuid":"x","mgCaffeine":5,"anchor":1}]}"#)
                == WireFormat.DecodingError("not a UUID: \"x\""))
        #expect(
            error(#"{"anchor":1,"added":[{\#(drink),"type":"green tea","anchor":1}]}"#)
                == WireFormat.DecodingError("not a drink type's name: \"green tea\""))
        // A name of the person's catalogue (§15) reads, whatever the catalogue holds now.
        #expect(error(#"{"anchor":1,"added":[{\#(drink),"type":"flatWhite","anchor":1}]}"#) == nil)
        #expect(error(#"{"anchor":1,"added":[{\#(drink),"mgCaffeine":"5","anchor":1}]}"#) != nil)
        #expect(error(#"{"anchor":1,"added":[{"uuid":"E7F3A2B1-0C4D-4E5F-8A9B-1C2D3E4F5A6B","anchor":1}]}"#) != nil)
        #expect(error(#"{"anchor":1,"added":[}"#)?.description.hasPrefix("not JSON") == true)
    }
}
