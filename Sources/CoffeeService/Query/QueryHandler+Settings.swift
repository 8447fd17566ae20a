import CoffeeDomain
import Foundation
import HealthStore

/// The person's settings and catalogue (docs/protocol.md §15): read as they
/// are now, changed in a commit of the store with an anchor of its own.
extension QueryHandler {
    /// `settings`: the values the person goes by, what the configuration
    /// gives, and the anchor of their last change.
    func settingsReply() -> JSONValue {
        let current = settings.current
        return .object([
            ("ok", true), ("anchor", .int(current.anchor)), ("settings", current.person.json),
            ("defaults", settings.defaults.json),
        ])
    }

    /// `putSettings`: the names `settings` gives, checked all before any is
    /// written; the model is rebuilt with them.
    func putSettings(_ request: JSONValue) async throws -> JSONValue {
        let rows: [(name: String, value: String)]
        do throws(ValidationError) {
            rows = try PersonSettings.update(from: request[member: "settings"] ?? .null)
        } catch {
            let field = error.field.map { "settings." + $0 } ?? "settings"
            throw QueryError(.badRequest, "\(field): \(error.rule)", field: field)
        }
        try await write(scope: SettingsScope.person.rawValue, rows)
        return settingsReply()
    }

    /// `catalogue`: every entry, retired ones too, and the anchor of the last change.
    func catalogueReply() -> JSONValue {
        let current = settings.current
        return .object([("ok", true), ("anchor", .int(current.anchor)), ("drinks", current.catalogue.json)])
    }

    /// `putCatalogue`: adds or changes the entry `name` as `entry` says.
    func putCatalogue(_ request: JSONValue) async throws -> JSONValue {
        guard case .string(let name)? = request[member: "name"] else {
            throw QueryError(.badRequest, "name must be the drink's name, a string", field: "name")
        }
        let rows: [(name: String, value: String)]
        do throws(ValidationError) {
            rows = try settings.catalogue.update(
                name: name, body: request[member: "entry"] ?? .null, maxMgCaffeine: validator.limits.maxMgCaffeine)
        } catch {
            let field = error.field.map { $0 == "name" ? $0 : "entry." + $0 } ?? "entry"
            throw QueryError(.badRequest, "\(field): \(error.rule)", field: field)
        }
        try await write(scope: SettingsScope.catalogue.rawValue, rows)
        return catalogueReply()
    }

    /// One commit of `rows`. The settings are the new ones when it returns:
    /// the store, their one owner, takes them before it announces or replies.
    private func write(scope: String, _ rows: [(name: String, value: String)]) async throws {
        _ = try await store.writeSettings(scope: scope, rows)
    }
}
