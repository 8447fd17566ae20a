import CoffeeDomain
import Foundation
import Testing

/// The person's settings and catalogue (docs/protocol.md §15): what a body
/// may change, what is refused and how it is named, and how the store's
/// rows read over the configuration's defaults.
@Suite("Settings and the catalogue")
struct SettingsTests {
    func json(_ text: String) -> JSONValue { try! JSONReader.parse(Data(text.utf8)) }

    @Test func aBodyBecomesRowsOrIsRefusedNamingTheField() throws {
        let rows = try PersonSettings.update(
            from: json(#"{"halfLifeHours": 2.5, "timeZone": "Asia/Tokyo", "dailyLimitMg": null}"#))
        #expect(rows.map(\.name) == ["halfLifeHours", "timeZone", "dailyLimitMg"])
        #expect(rows.map(\.value) == ["2.5", "\"Asia/Tokyo\"", "null"])
        let refusals: [(String, String?)] = [
            (#"{"halfLifeHours": 0}"#, "halfLifeHours"), (#"{"halfLifeHours": 48.5}"#, "halfLifeHours"),
            (#"{"sleepThresholdMg": true}"#, "sleepThresholdMg"), (#"{"dailyLimitMg": 100001}"#, "dailyLimitMg"),
            (#"{"timeZone": "CET+1"}"#, "timeZone"), (#"{"timeZone": "Europe/Atlantis"}"#, "timeZone"),
            (#"{"zone": "UTC"}"#, "zone"), ("{}", nil), ("[]", nil),
        ]
        for (body, field) in refusals {
            #expect(throws: ValidationError.self, "\(body)") { try PersonSettings.update(from: json(body)) }
            do {
                _ = try PersonSettings.update(from: json(body))
            } catch {
                #expect(error.field == field, "\(body)")
            }
        }
    }

    @Test func storedValuesReadOverTheDefaults() {
        let defaults = PersonSettings(model: CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!))
        let settings = PersonSettings(
            defaults: defaults,
            stored: ["halfLifeHours": "3", "timeZone": "\"Europe/Berlin\"", "dailyLimitMg": "null", "sleepThresholdMg": "-1"])
        #expect(settings.model.halfLifeHours == 3)
        #expect(settings.timeZoneName == "Europe/Berlin" && settings.timeZone.identifier == "Europe/Berlin")
        #expect(settings.dailyLimitMg == 400 && settings.sleepThresholdMg == 50)  // null and out of range: the default
        #expect(PersonSettings.timeZone(named: "UTC") != nil && PersonSettings.timeZone(named: "EST") == nil)
    }

    @Test func namesAreWellFormedAndSection1sTypesAreBuiltIn() {
        #expect(DrinkType(rawValue: "flatWhite")?.isBuiltIn == false)
        #expect(DrinkType(rawValue: "cold-brew_2") != nil)
        for bad in ["", "9lives", "flat white", "café", "a/b", String(repeating: "a", count: 65)] {
            #expect(DrinkType(rawValue: bad) == nil, "\(bad)")
        }
        #expect(DrinkType.builtIn.count == 11 && DrinkType.builtIn.allSatisfy(\.isBuiltIn))
        #expect(DrinkType(rawValue: "quadEspresso") == .quadEspresso && DrinkType.quadEspresso.defaultServingMg == 256)
    }

    @Test func catalogueChangesAndTheirRefusals() throws {
        var stored: [String: String] = [:]
        func put(_ name: String, _ body: String) throws {
            for (n, v) in try DrinkCatalogue(stored: stored).update(name: name, body: json(body), maxMgCaffeine: 1000) {
                stored[n] = v
            }
        }
        try put("flatWhite", #"{"mgCaffeine": 130}"#)
        try put("smallCoffee", #"{"mgCaffeine": 90}"#)
        try put("smallCup", #"{"renamedFrom": "smallCoffee"}"#)
        try put("chocolate", #"{"retired": true}"#)
        let catalogue = DrinkCatalogue(stored: stored)
        #expect(catalogue.entries.map(\.type.rawValue).suffix(2) == ["flatWhite", "smallCup"])
        #expect(catalogue.entry(.smallCoffee) == .init(type: .smallCoffee, mgCaffeine: 90, retired: true))
        #expect(catalogue.entry(DrinkType(rawValue: "smallCup")!)?.mgCaffeine == 90)
        #expect(catalogue.entry(.chocolate)?.retired == true && catalogue.entry(.chocolate)?.mgCaffeine == 18)
        #expect(!catalogue.offered.contains { $0.type == .chocolate || $0.type == .smallCoffee })
        let refusals: [(String, String, String?)] = [
            ("mocha", "{}", "mgCaffeine"), ("mocha", #"{"mgCaffeine": 1001}"#, "mgCaffeine"),
            ("mocha", #"{"mgCaffeine": "80"}"#, "mgCaffeine"), ("mocha", #"{"retired": 1, "mgCaffeine": 8}"#, "retired"),
            ("mocha", #"{"renamedFrom": "latte"}"#, "renamedFrom"),
            ("flatWhite", #"{"renamedFrom": "flatWhite"}"#, "renamedFrom"),
            ("smallCup", #"{"renamedFrom": "flatWhite"}"#, "name"), ("x y", #"{"mgCaffeine": 8}"#, "name"),
            ("mocha", #"{"mg": 8}"#, "mg"), ("mocha", "[8]", nil),
        ]
        for (name, body, field) in refusals {
            do {
                _ = try catalogue.update(name: name, body: json(body), maxMgCaffeine: 1000)
                Issue.record("\(name) \(body) was taken")
            } catch {
                #expect(error.field == field, "\(name) \(body)")
            }
        }
    }

    @Test func theValidatorGoesByTheCatalogue() throws {
        let live = LiveSettings()
        live.update(
            stored: [
                "catalogue": [
                    "flatWhite": #"{"mgCaffeine":130,"retired":false}"#, "chocolate": #"{"mgCaffeine":18,"retired":true}"#,
                ]
            ],
            anchor: 7)
        let validator = DrinkValidator(settings: live)
        let now = Date()
        func drink(_ fields: String) throws(ValidationError) -> Drink {
            var input = DrinkInput(
                json: json(#"{"uuid": "\#(UUID().uuidString)", "date": "\#(RFC3339.string(now))", \#(fields)}"#))
            input.source = .absent
            return try validator.drink(from: input, now: now, defaultSource: "test")
        }
        #expect(try drink(#""type": "flatWhite""#).mgCaffeine == 130)
        #expect(try drink(#""type": "flatWhite", "mgCaffeine": 20"#).mgCaffeine == 20)
        #expect(try drink(#""type": "chocolate", "mgCaffeine": 20"#).type == .chocolate)  // retired, with its mg
        for refused in [#""type": "chocolate""#, #""type": "mocha", "mgCaffeine": 20"#, #""type": "no such""#] {
            #expect(throws: ValidationError.self, "\(refused)") { try drink(refused) }
        }
        // An older announcement does not replace newer settings.
        live.update(stored: [:], anchor: 3)
        #expect(live.catalogue.entry(DrinkType(rawValue: "flatWhite")!) != nil)
    }
}
