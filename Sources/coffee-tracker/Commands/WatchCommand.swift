import CoffeeDomain
import CoffeeService
import Foundation
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `watch`: subscribes to the update endpoint and shows what arrives.
enum WatchCommand {
    static let help = """
        Usage: coffee-tracker watch [--updates ENDPOINT] [--query ENDPOINT] [--config FILE] [--count N] [--timeout SECONDS]

        Subscribes to live updates. On a terminal it redraws one view: caffeine
        now with its level colour, cups today, a sparkline of the next 24 h and
        the anchor; it starts from the current model (asked of the query
        endpoint right after subscribing). Elsewhere it prints one line per
        message: "TOPIC JSON".
          --count N          stop after N messages
          --timeout SECONDS  how long without any message (not even a heartbeat)
                             before it gives up (default 5; 0 waits for ever); on a
                             terminal it says "reconnecting…" and carries on instead
          --key FILE         this client's secret certificate, under security.curve
          --server-key KEY   the service's public key (default: endpoints.json via --config)
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try Arguments(
            words, valued: ["config", "updates", "query", "count", "timeout", "key", "server-key"], switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        let configuration = try loadConfiguration(args["config"])
        let discovered =
            try args["updates"] == nil ? EndpointDiscovery.running(configuration) : EndpointDiscovery.endpoints(configuration)
        var endpoint = args["updates"] ?? discovered.updates
        try EndpointDiscovery.checkScheme(endpoint)
        let limit = args["count"].flatMap { Int($0) } ?? Int.max
        let seconds = args["timeout"].flatMap { Double($0) } ?? 5
        let timeoutMs = seconds <= 0 ? -1 : Int(seconds * 1000)  // 0: wait for ever
        let context = ZMQContext()
        let curve = try ClientCurve.from(
            keyFile: args["key"], serverKey: args["server-key"], discovered: EndpointDiscovery.serverKey(configuration))
        func subscribe(_ endpoint: String) throws -> ZMQSocket {
            let socket = try ZMQSocket(context, .sub)
            try socket.setLinger(ms: 0)
            try socket.secure(curve)
            try socket.subscribe("")
            try socket.connect(endpoint)
            return socket
        }
        var socket = try subscribe(endpoint)
        defer { socket.close() }
        let tty = isatty(1) != 0
        var seen = 0
        var lastModel: [String: Any] = [:]
        var lastAnchor: Any = "?"
        if tty {
            // Subscribe first, then ask for the state (the Clone pattern), so
            // the view starts complete and nothing between is missed.
            let query = args["query"] ?? discovered.query
            if let client = try? QueryClient(endpoint: query, timeout: 2, curve: curve),
                let reply = try? client.call(.object([("op", "model")])), reply["ok"] as? Bool == true
            {
                lastModel = reply
                lastAnchor = reply["anchor"] ?? lastAnchor
                draw(lastModel, anchor: lastAnchor, latest: "model (query)")
            }
        }
        while seen < limit {
            guard try ZMQSocket.poll([.socket(socket)], timeoutMs: timeoutMs).first == true,
                let frames = try socket.receive(dontWait: true), frames.count == 2
            else {
                guard tty else {
                    printError(
                        "coffee-tracker watch: nothing from \(endpoint) in \(Double(timeoutMs) / 1000) s; is the service running?"
                    )
                    return 1
                }
                // A person is watching: say so and carry on, finding the
                // service again (a restart may have bound a new port).
                draw(lastModel, anchor: lastAnchor, latest: "nothing for \(Int(seconds)) s: reconnecting…")
                if args["updates"] == nil, let fresh = try? EndpointDiscovery.running(configuration).updates, fresh != endpoint {
                    socket.close()
                    endpoint = fresh
                    socket = try subscribe(endpoint)
                }
                continue
            }
            seen += 1
            let topic = String(decoding: frames[0], as: UTF8.self)
            let body = String(decoding: frames[1], as: UTF8.self)
            guard tty else {
                print("\(topic) \(body)")
                fflush(nil)
                continue
            }
            let object = (try? JSONSerialization.jsonObject(with: frames[1]) as? [String: Any]) ?? [:]
            if topic == "model" { lastModel = object }
            lastAnchor = object["anchor"] ?? lastAnchor
            draw(lastModel, anchor: lastAnchor, latest: topic)
        }
        return 0
    }

    static func draw(_ model: [String: Any], anchor: Any, latest: String) {
        let mg = (model["mgCaffeine"] as? NSNumber)?.doubleValue ?? 0
        let level = model["level"] as? String ?? "green"
        let colour = ["green": "32", "yellow": "33", "red": "31"][level] ?? "0"
        let cups = (model["cupsToday"] as? NSNumber)?.doubleValue ?? 0
        let points = (model["timeline"] as? [[String: Any]] ?? []).compactMap { ($0["mgCaffeine"] as? NSNumber)?.doubleValue }
        print("\u{1B}[H\u{1B}[2J", terminator: "")
        print("Coffee Tracker — live")
        print(String(format: "caffeine  \u{1B}[%@m%.1f mg (%@)\u{1B}[0m", colour, mg, level))
        print(String(format: "cups      %.2f today", cups))
        let top = points.max() ?? 0
        print("next 24 h \(sparkline(points, width: 48))  top \(Int(top.rounded())) mg")
        print(
            "          now" + String(repeating: " ", count: 7) + "+6 h" + String(repeating: " ", count: 8) + "+12 h"
                + String(repeating: " ", count: 7) + "+18 h" + String(repeating: " ", count: 4) + "+24 h")
        print("anchor    \(anchor)   last: \(latest)")
        fflush(nil)
    }

    /// Block characters for values, resampled to `width` columns.
    static func sparkline(_ values: [Double], width: Int) -> String {
        guard !values.isEmpty else { return "" }
        let bars = Array("▁▂▃▄▅▆▇█")
        let top = max(values.max() ?? 0, 1e-9)
        return String(
            (0..<min(width, values.count)).map { i in
                let v = values[i * values.count / min(width, values.count)]
                return bars[min(bars.count - 1, Int(v / top * Double(bars.count - 1)))]
            })
    }
}
