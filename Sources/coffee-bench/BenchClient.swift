import CoffeeDomain
import CoffeeService
import CoffeeTrackerClient
import Foundation
import ZeroMQ

/// A query-endpoint client for the harness (blocking; the harness is a CLI).
final class BenchClient {
    let context = ZMQContext()
    let socket: ZMQSocket

    init(endpoint: String, curve: ClientCurve? = nil) throws {
        socket = try ZMQSocket(context, .dealer)
        try socket.setLinger(ms: 0)
        try socket.secure(curve)
        try socket.connect(endpoint)
    }

    deinit { socket.close() }

    func call(_ request: String, timeoutMs: Int = 1000) throws -> [String: Any] {
        try socket.send([Data(), Data(request.utf8)])
        guard try ZMQSocket.poll([.socket(socket)], timeoutMs: timeoutMs).first == true,
            let frames = try socket.receive(dontWait: true),
            let reply = try JSONSerialization.jsonObject(with: frames.last!) as? [String: Any]
        else { throw BenchError("no reply") }
        return reply
    }

    func ping() throws -> Int64 { (try call(#"{"op":"ping"}"#, timeoutMs: 200)["anchor"] as? NSNumber)?.int64Value ?? -1 }
}

/// Drink bodies as a publisher sends them.
///
/// Throughput runs replay a history: drinks dated at random over the past
/// year, so about 1 in 365 falls in the model's 24-hour window. Live runs
/// (latency, fan-out) send drinks of the last hour.
enum Bodies {
    static let recent = RFC3339.string(Date().addingTimeInterval(-3600))

    static func drink(_ uuid: UUID = UUID(), date: String = recent) -> String {
        #"{"uuid":"\#(uuid.uuidString)","mgCaffeine":95.5,"date":"\#(date)","source":"bench"}"#
    }

    /// A drink dated somewhere in the past year.
    static func historical() -> String { drink(date: historicalDate()) }

    static func historicalDate() -> String {
        RFC3339.string(Date().addingTimeInterval(-Double.random(in: 60...(365 * 86_400))))
    }

    static func drinks(_ n: Int) -> String { "[" + (0..<n).map { _ in historical() }.joined(separator: ",") + "]" }
}
