import Foundation

extension BenchMain {
    struct Row: Encodable {
        var figure: String
        var value: Double
        var unit: String
        var baseline: Double?
        var baselineName: String?
        var ratio: Double?
        var target: String
        var pass: Bool?
    }

    /// One row of the table on stdout.
    static func line(_ row: Row) -> String {
        let verdict = row.pass.map { $0 ? "ok" : "MISS" } ?? "-"
        let base = row.baseline.map { String(format: "%.1f", $0) } ?? "-"
        let ratio = row.ratio.map { String(format: "%.2f", $0) } ?? "-"
        return
            "\(row.figure.padding(toLength: 44, withPad: " ", startingAt: 0)) "
            + "\(String(format: "%12.2f", row.value)) \(row.unit.padding(toLength: 10, withPad: " ", startingAt: 0)) "
            + "\(base.padding(toLength: 12, withPad: " ", startingAt: 0)) \(ratio.padding(toLength: 6, withPad: " ", startingAt: 0)) "
            + "\(row.target.padding(toLength: 18, withPad: " ", startingAt: 0)) \(verdict)"
    }

    static let usage = """
        Usage: coffee-bench [--runs N] [--out FILE] [--quick] [--binary PATH] [--only SECTION]

        Starts release builds of `coffee-tracker serve` in a scratch folder and
        measures ingest throughput, latency, inbox import, start-up, fan-out and
        CPU, each against a baseline taken in the same run. Prints a table and
        writes FILE (default bench/results.json); what it is measuring now goes to
        stderr. --quick uses smaller sizes.
        --only runs one section: ingest, latency, inbox, startup, fanout or stages.
        """
}
