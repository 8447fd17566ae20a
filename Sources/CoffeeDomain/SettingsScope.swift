/// The scopes of what a store keeps of the person (docs/protocol.md §15):
/// their settings and their drink catalogue, each a set of names and JSON
/// values (`KeptRows.Setting.scope`, the `settings` table's `scope`).
public enum SettingsScope: String, Sendable, CaseIterable {
    case person
    case catalogue
}
