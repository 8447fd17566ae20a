import CoffeeDomain
import Foundation
import Testing

@Suite("Health Auto Export's body (docs/protocol.md §12)", .timeLimit(.minutes(1)))
struct HealthAutoExportTests {
    let now = RFC3339.parse("2026-12-03T12:00:00Z")!

    func read(_ text: String) throws -> HealthAutoExport {
        try Array(text.utf8).withUnsafeBytes { try HealthAutoExport.read($0) }
    }

    /// The UUID is made over the number's text as written: `12.50` and `12.5`
    /// are two data (Python's uuid5 over the same names gave these).
    @Test func theUUIDIsMadeOverTheNumbersTextAsItStands() throws {
        let body = #"""
            {"data": {"metrics": [{"data": [{"qty": 12.50, "date": "2026-12-03 07:15:00 +0100"},
                                            {"date": "2026-12-03 07:15:00 +0100", "qty": 12.5}],
                                   "units": "mg", "name": "dietary_caffeine"}]}}
            """#
        let found = try read(body).drinks(validator: DrinkValidator(), now: now)
        #expect(found.skipped.isEmpty)
        #expect(
            found.drinks.map(\.uuid.uuidString) == [
                "D585204F-B25E-5610-A4AE-197FD855A2A7", "09FFCF72-08FF-55D8-80C6-C5FDEE472A79",
            ])
        #expect(found.drinks.allSatisfy { $0.mgCaffeine == 12.5 && $0.source == "health-auto-export" })
        #expect(found.drinks[0].date == RFC3339.parse("2026-12-03T06:15:00Z"))
    }

    @Test func otherMetricsAndWorkoutsAreCountedAndABadDatumIsNamed() throws {
        let body = #"""
            {"data": {"metrics": [{"name": "step_count", "units": "count", "data": [{"qty": 1, "date": "2026-12-03 07:00:00 +0000"}]},
                                  {"name": "dietary_caffeine", "units": "mg", "data": [
                                    {"qty": "95", "date": "2026-12-03 07:00:00 +0000"}, 7,
                                    {"qty": 95, "date": "2026-12-03T07:00:00Z"}, {"qty": 5000, "date": "2026-12-03 07:00:00 +0000"},
                                    {"qty": 80, "date": "2026-12-03 07:00:00 +0000", "source": 3},
                                    {"qty": 80, "date": "2026-12-03 07:00:00 +0000", "source": "Watch"}]},
                                  {"name": "dietary_caffeine", "units": "g", "data": [{"qty": 0.1, "date": "2026-12-03 07:00:00 +0000"}]}],
                      "workouts": [{}, {}, {}]}}
            """#
        let found = try read(body).drinks(validator: DrinkValidator(), now: now)
        #expect(found.ignoredMetrics == 1 && found.ignoredWorkouts == 3)
        #expect(found.drinks.count == 1 && found.drinks[0].source == "Watch")
        #expect(
            found.skipped.map { "\($0.index) \($0.field)" } == ["0 qty", "1 qty", "2 date", "3 qty", "4 source", "0 units"])
    }

    @Test(arguments: ["[]", #"{"data": []}"#, #"{"data": {"metrics": {}}}"#, #"{"other": 1}"#, "3"])
    func aBodyOfAnotherShapeIsRefused(_ body: String) {
        #expect(throws: HealthAutoExport.ShapeError.self) { try read(body) }
    }

    @Test func textThatIsNotJSONIsASyntaxError() {
        #expect(throws: JSONReader.SyntaxError.self) { try read(#"{"data": {"metrics": [}"#) }
        #expect(throws: JSONReader.SyntaxError.self) { try read(#"{"data": {"metrics": []}} trailing"#) }
    }
}
