import CoffeeDomain
import Foundation

/// A run of records as PostgreSQL array literals, one per column, for the
/// insert over `unnest` of them (`SQLDialect.arrayInsert`): any number of
/// rows in one statement and one round trip, where a `VALUES` list is a
/// statement per size and eight parameters per row.
///
/// The literal syntax is PostgreSQL's (`{a,b,NULL}`; an element in double
/// quotes with `"` and `\` escaped by a backslash). UUIDs and numbers need no
/// quotes; text is always quoted, so that no value of a drink's `type` or
/// `source` can be read as `NULL`, a separator or a nested array.
enum RecordArrays {
    /// The literals of `uuid`, `version`, `anchor`, `date_ms`, `mg`, `type`
    /// and `source`, in that order.
    static func literals(_ drinks: ArraySlice<Drink>, anchors: some Sequence<Int64>) -> [String] {
        var columns = [[UInt8]](repeating: [UInt8(ascii: "{")], count: 7)
        for k in columns.indices { columns[k].reserveCapacity(drinks.count * (k == 0 ? 37 : 12) + 2) }
        for (i, (drink, anchor)) in zip(drinks, anchors).enumerated() {
            if i > 0 { for k in columns.indices { columns[k].append(UInt8(ascii: ",")) } }
            UUIDText.write(drink.uuid, into: &columns[0])
            JSONBytes.append(drink.version, to: &columns[1])
            JSONBytes.append(anchor, to: &columns[2])
            JSONBytes.append(drink.epochMilliseconds, to: &columns[3])
            JSONBytes.append(drink.mgCaffeine, to: &columns[4])
            quoted(drink.type?.rawValue, into: &columns[5])
            quoted(drink.source, into: &columns[6])
        }
        return columns.map { String(decoding: $0 + [UInt8(ascii: "}")], as: UTF8.self) }
    }

    /// The literal of the drinks' UUIDs alone.
    static func uuids(_ drinks: ArraySlice<Drink>) -> String {
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(drinks.count * 37 + 2)
        for (i, drink) in drinks.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            UUIDText.write(drink.uuid, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// A text element: `NULL` for nil, else in double quotes, escaped.
    static func quoted(_ text: String?, into out: inout [UInt8]) {
        guard let text else { return JSONBytes.append("NULL", to: &out) }
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
            out.append(byte)
        }
        out.append(UInt8(ascii: "\""))
    }
}
