import CoffeeDomain
import Foundation
import Testing

@testable import CoffeeRelay

@Suite("Relay: the chain read from a message's head")
struct UpdateRelayTests {
    /// The relay checks the `changes` chain from the head of each body,
    /// as the service writes it, without parsing the rest.
    @Test func anchorsComeFromTheHeadOfWhatTheServiceWrites() {
        let drink = Drink(mgCaffeine: 95, date: Date(timeIntervalSince1970: 1_700_000_000))
        let body = WireFormat.changesMessage(
            anchor: 9_007_199_254_740_993, previousAnchor: 9_007_199_254_740_992, added: [drink],
            addedAnchors: [9_007_199_254_740_993], deleted: [], deletedAnchors: [])
        let parsed = UpdateRelay.anchors(Data(body))
        #expect(parsed?.anchor == 9_007_199_254_740_993 && parsed?.previous == 9_007_199_254_740_992)
        #expect(UpdateRelay.anchors(Data(#"{"previousAnchor":1,"anchor":2}"#.utf8)) == nil)  // not the service's shape
        #expect(UpdateRelay.anchors(Data("{}".utf8)) == nil)
        #expect(UpdateRelay.anchors(Data()) == nil)
    }
}
