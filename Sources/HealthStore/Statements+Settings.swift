import CoffeeDomain
import Foundation

/// The settings' rows (docs/protocol.md §15; `StoredSettings`): a handful,
/// read whole, written one name at a time under a commit's anchor.
extension Statements {
    func settingsRows() throws -> [(scope: String, name: String, value: String, anchor: Int64)] {
        try settingsRows(after: nil, through: .max).map { ($0.scope, $0.name, $0.value, $0.anchor) }
    }

    /// The rows written after `anchor` through `end` (all of them with nil).
    func settingsRows(after anchor: Int64?, through end: Int64) throws -> [KeptRows.Setting] {
        let p = dialect.p
        let s = try cached(
            "SELECT scope, name, value, anchor FROM settings WHERE anchor > \(p(1)) AND anchor <= \(p(2)) ORDER BY anchor, scope, name"
        )
        try s.bind(1, anchor ?? -1)
        try s.bind(2, end)
        defer { s.reset() }
        var rows: [KeptRows.Setting] = []
        while try s.step() {
            rows.append(
                .init(scope: s.string(0) ?? "", name: s.string(1) ?? "", value: s.string(2) ?? "null", anchor: s.int64(3)))
        }
        return rows
    }

    /// Writes one name under `anchor`, unless a row of a later anchor is held
    /// (a standby may be handed rows out of order).
    func putSetting(scope: String, name: String, value: String, anchor: Int64) throws {
        let p = dialect.p
        let s = try cached(
            """
            INSERT INTO settings(scope, name, value, anchor) VALUES (\(p(1)), \(p(2)), \(p(3)), \(p(4)))
            ON CONFLICT(scope, name) DO UPDATE SET value = excluded.value, anchor = excluded.anchor
            WHERE excluded.anchor >= settings.anchor
            """)
        try s.bind(1, scope)
        try s.bind(2, name)
        try s.bind(3, value)
        try s.bind(4, anchor)
        try s.run()
    }
}
