import CoffeeDomain
import Foundation
import Testing

@testable import CoffeeRelay

@Suite("Relay: what the capture shows")
struct UpdateRelayTests {
    /// The relay checks the `changes` chain from the head of each body,
    /// as the service writes it, without parsing the rest.
    @Test func anchorsComeFromTheHeadOfWhatTheServiceWrites() {
        let drink = Drink(mgCaffeine: 95, date: Date(timeIntervalSince1970: 1_700_000_000))
        for identity in [nil, StoreIdentity(store: UUID(), epoch: Int64.max)] {
            let body = WireFormat.changesMessage(
                identity: identity, anchor: 9_007_199_254_740_993, previousAnchor: 9_007_199_254_740_992, added: [drink],
                addedAnchors: [9_007_199_254_740_993], deleted: [], deletedAnchors: [])
            let parsed = UpdateRelay.anchors(Data(body))
            #expect(parsed?.anchor == 9_007_199_254_740_993 && parsed?.previous == 9_007_199_254_740_992)
        }
        #expect(UpdateRelay.anchors(Data(#"{"previousAnchor":1,"anchor":2}"#.utf8)) == nil)  // not the service's shape
        #expect(UpdateRelay.anchors(Data("{}".utf8)) == nil)
        #expect(UpdateRelay.anchors(Data()) == nil)
    }

    /// What the capture shows is counted by topic; a `changes` whose
    /// `previousAnchor` is not the anchor before is a gap; a model is kept.
    @Test func theCaptureIsCountedAndAGapSeen() {
        var tally = UpdateRelay.Counts()
        var model: Data?
        var last: Int64?
        func feed(_ frames: [String]) {
            let datas = frames.map { Data($0.utf8) }
            func lend(_ i: Int, _ lent: [UnsafeRawBufferPointer]) {
                guard i < datas.count else {
                    UpdateRelay.captured(lent, into: &tally, model: &model, lastAnchor: &last)
                    return
                }
                datas[i].withUnsafeBytes { lend(i + 1, lent + [$0]) }
            }
            lend(0, [])
        }
        feed(["\u{1}model"])
        feed(["changes", #"{"anchor":2,"previousAnchor":0,"added":[],"deleted":[]}"#])
        feed(["changes", #"{"anchor":3,"previousAnchor":2,"added":[],"deleted":[]}"#])
        feed(["model", #"{"anchor":3}"#])
        feed(["changes", #"{"anchor":9,"previousAnchor":7,"added":[],"deleted":[]}"#])  // 4 to 7 never came
        feed(["heartbeat", "{}"])
        feed(["\u{0}model"])  // an unsubscription is not a subscriber
        #expect(tally.changes == 3 && tally.models == 1 && tally.heartbeats == 1 && tally.subscriptions == 1)
        #expect(tally.upstreamGaps == 1 && last == 9)
        #expect(model == Data(#"{"anchor":3}"#.utf8))
    }
}
