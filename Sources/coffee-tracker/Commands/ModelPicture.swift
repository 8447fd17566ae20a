import CoffeeCharts
import CoffeeDomain
import CoffeeService
import CoffeeTrackerClient
import Foundation

extension ClientCommands {
    /// `model --svg FILE`: the live drinks of the chart's 36 hours, read
    /// through `changes` from null, drawn as `GET /model.svg` draws them.
    static func drawModel(_ client: QueryClient, _ args: Arguments) throws {
        let path = args["svg"]!
        var now = Date()
        if let at = args["at"] {
            guard let date = RFC3339.parse(at) else {
                throw Arguments.UsageError(description: "--at needs an RFC 3339 date with a zone, got \"\(at)\"")
            }
            now = date
        }
        let window = CaffeineChart.window(at: now)
        var drinks: [Drink] = []
        var anchor: JSONValue = .null
        while true {
            let reply = try request(
                client, [("op", .string(QueryOperation.changes.rawValue)), ("anchor", anchor), ("limit", 10_000)],
                Arguments([], valued: [], switches: []))
            for d in reply["added"] as? [[String: Any]] ?? [] {
                guard let mg = (d["mgCaffeine"] as? NSNumber)?.doubleValue, let text = d["date"] as? String,
                    let date = RFC3339.parse(text), window.contains(date)
                else { continue }
                drinks.append(Drink(mgCaffeine: mg, date: date, source: d["source"] as? String ?? "query"))
            }
            anchor = .int((reply["anchor"] as? NSNumber)?.int64Value ?? 0)
            if (reply["hasMore"] as? Bool) != true { break }
        }
        // The half-life and the threshold as the service has them (the person's settings, §15).
        let settings = try client.settings()
        let svg = CaffeineChart(model: settings.model, sleepThresholdMg: settings.sleepThresholdMg).svg(drinks, now: now)
        if path == "-" {
            print(svg, terminator: "")
        } else {
            do {
                try Data(svg.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            } catch {
                throw QueryClient.Failure(description: "cannot write \(path): \(error.localizedDescription)")
            }
            print("wrote \(path): \(drinks.count) drinks in the chart's 36 hours")
        }
    }
}
