import Foundation

/// Health Auto Export's REST body (docs/protocol.md §12), read as the app
/// writes it: `{"data": {"metrics": [{"name", "units", "data": [{"qty",
/// "date", "source"?}]}], "workouts": [...]}}`. Each datum of the metric
/// `dietary_caffeine` in `mg` becomes a drink whose UUID is the version-5
/// UUID of §5's namespace over `SOURCE|DATE|QTY|UNITS`, QTY being the
/// number's text as it stands in the body, so that a resent period adds
/// nothing. Pure: read once, then `drinks(validator:now:)`.
public struct HealthAutoExport: Sendable {
    /// The metric whose data become drinks.
    public static let caffeine = "dietary_caffeine"
    /// A drink's `source` when its datum names none.
    public static let defaultSource = "health-auto-export"

    /// One datum as read: its fields as they were, before any rule.
    public struct Datum: Sendable {
        public var qty: JSONValue?
        /// `qty`'s text in the body.
        public var qtyText: String?
        public var date: JSONValue?
        public var source: JSONValue?
        /// Not an object at all.
        public var malformed = false
    }

    public struct Metric: Sendable {
        public var name: String?
        public var units: String?
        public var data: [Datum] = []
    }

    public var metrics: [Metric] = []
    public var workouts = 0

    /// A body that is JSON but not of the app's shape.
    public struct ShapeError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// A datum left out, by its index in its metric's `data` and the app's field.
    public struct Skipped: Sendable, Equatable {
        public var index: Int
        public var field: String
        public var message: String
    }

    /// What a body comes to.
    public struct Drinks: Sendable {
        public var drinks: [Drink] = []
        public var skipped: [Skipped] = []
        /// Metric objects other than `dietary_caffeine`.
        public var ignoredMetrics = 0
        public var ignoredWorkouts = 0
    }

    /// Reads `bytes`.
    ///
    /// - Throws: `JSONReader.SyntaxError` for text that is not JSON;
    ///   `ShapeError` for JSON without `data.metrics` as an array.
    public static func read(_ bytes: UnsafeRawBufferPointer) throws -> HealthAutoExport {
        var export = HealthAutoExport()
        var problem: String?
        var sawMetrics = false
        var cursor = JSONReader.Cursor(bytes)
        guard cursor.peek() == UInt8(ascii: "{") else {
            _ = try cursor.value()  // not JSON at all: its own error
            throw ShapeError(description: "the body must be Health Auto Export's JSON object, {\"data\": {\"metrics\": [...]}}")
        }
        try cursor.members { (key, c) throws(JSONReader.SyntaxError) in
            guard key == "data", c.peek() == UInt8(ascii: "{") else {
                if key == "data" { problem = "data must be an object with metrics" }
                _ = try c.value()
                return
            }
            try c.members { (key, c) throws(JSONReader.SyntaxError) in
                if key == "metrics", c.peek() == UInt8(ascii: "[") {
                    sawMetrics = true
                    try c.elements { (m: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                        export.metrics.append(try metric(&m))
                    }
                } else if key == "workouts", c.peek() == UInt8(ascii: "[") {
                    try c.elements { (w: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                        _ = try w.value()
                        export.workouts += 1
                    }
                } else {
                    if key == "metrics" { problem = "data.metrics must be an array" }
                    if key == "workouts" { problem = "data.workouts must be an array" }
                    _ = try c.value()
                }
            }
        }
        try cursor.end()
        if let problem { throw ShapeError(description: problem) }
        guard sawMetrics || export.workouts > 0 else {
            throw ShapeError(
                description: "no data.metrics: the body must be Health Auto Export's {\"data\": {\"metrics\": [...]}}")
        }
        return export
    }

    private static func metric(_ c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) -> Metric {
        var metric = Metric()
        guard c.peek() == UInt8(ascii: "{") else {
            _ = try c.value()
            return metric  // no name: ignored
        }
        try c.members { (key, c) throws(JSONReader.SyntaxError) in
            if key == "name", case .string(let name) = try c.value() {
                metric.name = name
            } else if key == "units", case .string(let units) = try c.value() {
                metric.units = units
            } else if key == "data", c.peek() == UInt8(ascii: "[") {
                try c.elements { (d: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                    metric.data.append(try datum(&d))
                }
            } else if !(key == "name" || key == "units") {
                _ = try c.value()
            }
        }
        return metric
    }

    private static func datum(_ c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) -> Datum {
        var datum = Datum()
        guard c.peek() == UInt8(ascii: "{") else {
            _ = try c.value()
            datum.malformed = true
            return datum
        }
        try c.members { (key, c) throws(JSONReader.SyntaxError) in
            if key == "qty" {
                (datum.qty, datum.qtyText) = try c.valueAndText()
            } else if key == "date" {
                datum.date = try c.value()
            } else if key == "source" {
                datum.source = try c.value()
            } else {
                _ = try c.value()
            }
        }
        return datum
    }

    /// The drinks of every `dietary_caffeine` datum that keeps the rules
    /// (§1, `validator`'s limits), and the rest named.
    public func drinks(validator: DrinkValidator, now: Date) -> Drinks {
        var out = Drinks(ignoredWorkouts: workouts)
        for metric in metrics {
            guard metric.name == Self.caffeine else {
                out.ignoredMetrics += 1
                continue
            }
            for (index, datum) in metric.data.enumerated() {
                do throws(ValidationError) {
                    out.drinks.append(try drink(datum, units: metric.units, validator: validator, now: now))
                } catch {
                    out.skipped.append(Skipped(index: index, field: error.field ?? "qty", message: error.reason))
                }
            }
        }
        return out
    }

    /// The name a datum's UUID is made from: `SOURCE|DATE|QTY|UNITS`.
    public static func uuidName(source: String, date: String, qty: String, units: String) -> String {
        "\(source)|\(date)|\(qty)|\(units)"
    }

    private func drink(_ datum: Datum, units: String?, validator: DrinkValidator, now: Date) throws(ValidationError) -> Drink {
        guard !datum.malformed else { throw ValidationError(field: "qty", rule: "a datum must be an object") }
        guard units == "mg" else {
            throw ValidationError(
                field: "units", rule: "must be mg, got \(units.map { "\"\($0)\"" } ?? "none"): export caffeine in mg")
        }
        guard let qty = datum.qty, let text = datum.qtyText, let mg = try? qty.number() else {
            throw ValidationError(field: "qty", rule: "must be a number of mg")
        }
        guard case .string(let dateText)? = datum.date else {
            throw ValidationError(field: "date", rule: "must be a date such as 2026-12-03 08:15:00 +0100")
        }
        guard let date = HealthDate.parse(dateText) else {
            throw ValidationError(
                field: "date", rule: "must be a date such as 2026-12-03 08:15:00 +0100, got \"\(dateText.prefix(64))\"")
        }
        var source = Self.defaultSource
        switch datum.source {
        case nil, .null?: break
        case .string(let given)?: source = given
        default: throw ValidationError(field: "source", rule: "must be a string")
        }
        let uuid = NameBasedUUID.v5(
            namespace: NameBasedUUID.healthRecords, name: Self.uuidName(source: source, date: dateText, qty: text, units: "mg"))
        let input = DrinkInput(
            json: .object([
                ("uuid", .string(uuid.uuidString)), ("mgCaffeine", .double(mg)), ("date", .string(RFC3339.string(date))),
                ("source", .string(source)),
            ]))
        do throws(ValidationError) {
            return try validator.drink(from: input, now: now, defaultSource: Self.defaultSource)
        } catch {
            // The app's names for the drink's fields.
            var renamed = error
            renamed.field = error.field == "mgCaffeine" ? "qty" : error.field
            throw renamed
        }
    }
}
