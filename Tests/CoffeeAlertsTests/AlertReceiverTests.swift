import CoffeeDomain
import Foundation
import Testing

@testable import CoffeeAlerts

/// What each receiver is sent (docs/protocol.md §16): the webhook's headers
/// and its signature against a published HMAC-SHA256 vector, ntfy's headers
/// by rule and event, and nothing that could end a header early.
@Suite("The receivers' requests")
struct AlertReceiverTests {
    func item(_ body: String) -> OutboxItem {
        OutboxItem(id: "a1b2", receiver: "webhook", body: body, createdMs: 0, nextMs: 0)
    }

    func header(_ name: String, _ headers: [(String, String)]) -> String? { headers.first { $0.0 == name }?.1 }

    /// RFC 4231, test case 2: the key "Jefe" over "what do ya want for nothing?".
    @Test func theWebhookSignsTheBodyWithHMACSHA256AndSendsItsIdAsTheIdempotencyKey() {
        let receiver = AlertReceiver.webhook(url: "http://127.0.0.1:1/hook", secret: Array("Jefe".utf8))
        let (headers, body) = receiver.request(item("what do ya want for nothing?"))
        #expect(body == Array("what do ya want for nothing?".utf8))
        #expect(
            header(AlertReceiver.signatureHeader, headers)
                == "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(header("Idempotency-Key", headers) == "a1b2")
        #expect(header("Content-Type", headers) == "application/json")
        // Another secret, another signature: the key is in it.
        let other = AlertReceiver.webhook(url: "http://127.0.0.1:1/hook", secret: Array("jefe".utf8)).request(
            item("what do ya want for nothing?"))
        #expect(header(AlertReceiver.signatureHeader, other.headers) != header(AlertReceiver.signatureHeader, headers))
    }

    @Test func ntfyGetsTheMessageAsTheBodyAndTheTitlePriorityAndTagsOfTheRule() throws {
        let alert = #"{"rule":"dailyLimit","event":"fired","title":"Over 400 mg today","message":"420 mg today."}"#
        let (headers, body) = AlertReceiver.ntfy(url: "http://127.0.0.1:1/t", token: "tk_1").request(item(alert))
        #expect(String(decoding: body, as: UTF8.self) == "420 mg today.")
        #expect(header("Title", headers) == "Over 400 mg today")
        #expect(header("Priority", headers) == "4" && header("Tags", headers) == "warning,coffee")
        #expect(header("Authorization", headers) == "Bearer tk_1")
        // Cleared is quieter; no token, no Authorization.
        let cleared = AlertReceiver.ntfy(url: "http://127.0.0.1:1/t", token: nil).request(
            item(#"{"rule":"sleepThreshold","event":"fired","title":"Fine to sleep","message":"m"}"#))
        #expect(header("Priority", cleared.headers) == "3" && header("Tags", cleared.headers) == "zzz")
        #expect(header("Authorization", cleared.headers) == nil)
    }

    @Test func aTitleWithALineBreakCannotAddAHeader() {
        let alert = #"{"rule":"levelOver","event":"fired","title":"Over\r\nX-Evil: 1","message":"m"}"#
        let (headers, _) = AlertReceiver.ntfy(url: "http://127.0.0.1:1/t", token: nil).request(item(alert))
        #expect(header("Title", headers) == "OverX-Evil: 1")
        #expect(headers.allSatisfy { !$0.1.contains("\r") && !$0.1.contains("\n") })
    }
}
