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
        let anchors = Array(anchors)
        return [
            uuids(drinks),
            array(drinks) { JSONBytes.append(drinks[$0].version, to: &$1) },
            array(drinks) { JSONBytes.append(anchors[$0 - drinks.startIndex], to: &$1) },
            array(drinks) { JSONBytes.append(drinks[$0].epochMilliseconds, to: &$1) },
            array(drinks) { JSONBytes.append(drinks[$0].mgCaffeine, to: &$1) },
            array(drinks) { quoted(drinks[$0].type?.rawValue, into: &$1) },
            array(drinks) { quoted(drinks[$0].source, into: &$1) },
        ]
    }

    /// The literal of the drinks' UUIDs alone.
    static func uuids(_ drinks: ArraySlice<Drink>) -> String {
        array(drinks, bytesEach: 37) { UUIDText.write(drinks[$0].uuid, into: &$1) }
    }

    /// `{e1,e2,…}`, each element written by `element` for a drink's index.
    private static func array(
        _ drinks: ArraySlice<Drink>, bytesEach: Int = 12, _ element: (Int, inout [UInt8]) -> Void
    ) -> String {
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(drinks.count * bytesEach + 2)
        for i in drinks.indices {
            if i > drinks.startIndex { out.append(UInt8(ascii: ",")) }
            element(i, &out)
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
