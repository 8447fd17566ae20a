import CoffeeDomain
import Foundation

/// The settings' rows (docs/protocol.md §15; `StoredSettings`): a handful,
/// read whole, written one name at a time under a commit's anchor.
extension Statements {
    func settingsRows() throws -> [(scope: String, name: String, value: String, anchor: Int64)] {
        let s = try cached("SELECT scope, name, value, anchor FROM settings ORDER BY scope, name")
        defer { s.reset() }
        var rows: [(scope: String, name: String, value: String, anchor: Int64)] = []
        while try s.step() { rows.append((s.string(0) ?? "", s.string(1) ?? "", s.string(2) ?? "null", s.int64(3))) }
        return rows
    }

    /// The anchor of the last change to the settings; 0 when none was made.
    func settingsAnchor() throws -> Int64 {
        let s = try cached("SELECT coalesce(max(anchor), 0) FROM settings")
        defer { s.reset() }
        return try s.step() ? s.int64(0) : 0
    }

    func putSetting(scope: String, name: String, value: String, anchor: Int64) throws {
        let p = dialect.p
        let s = try cached(
            """
            INSERT INTO settings(scope, name, value, anchor) VALUES (\(p(1)), \(p(2)), \(p(3)), \(p(4)))
            ON CONFLICT(scope, name) DO UPDATE SET value = excluded.value, anchor = excluded.anchor
            """)
        try s.bind(1, scope)
        try s.bind(2, name)
        try s.bind(3, value)
        try s.bind(4, anchor)
        try s.run()
    }
}
