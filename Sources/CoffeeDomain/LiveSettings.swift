import Foundation
import Synchronization

/// A person's settings and catalogue as they are now, for any thread
/// (docs/protocol.md §15): the configuration's defaults with what the store
/// keeps over them, replaced whole when a commit changes them. The store
/// owns it (`HealthStore.liveSettings`) and replaces it before a change is
/// announced or answered; the model, the rules, the query handler, the
/// pictures and the drink rules only read it.
public final class LiveSettings: Sendable {
    public struct Current: Sendable, Hashable {
        public var person: PersonSettings
        public var catalogue: DrinkCatalogue
        /// The anchor of the store's last change to them; 0 when none was made.
        public var anchor: Int64
        /// The store's rows by scope, names and JSON values, as they were read.
        public var stored: [String: [String: String]]
    }

    /// The configuration's values.
    public let defaults: PersonSettings
    private let value: Mutex<Current>

    /// - Parameter stored: the store's rows by scope (`person`, `catalogue`), names and JSON values.
    public init(defaults: PersonSettings = PersonSettings(), stored: [String: [String: String]] = [:], anchor: Int64 = 0) {
        self.defaults = defaults
        value = Mutex(Self.current(defaults, stored, anchor))
    }

    private static func current(_ defaults: PersonSettings, _ stored: [String: [String: String]], _ anchor: Int64) -> Current {
        Current(
            person: PersonSettings(defaults: defaults, stored: stored[SettingsScope.person.rawValue] ?? [:]),
            catalogue: DrinkCatalogue(stored: stored[SettingsScope.catalogue.rawValue] ?? [:]), anchor: anchor,
            stored: stored)
    }

    public var current: Current { value.withLock { $0 } }
    public var person: PersonSettings { value.withLock { $0.person } }
    public var catalogue: DrinkCatalogue { value.withLock { $0.catalogue } }
    /// The catalogue's entry of `type`, without copying the catalogue.
    public func entry(_ type: DrinkType) -> DrinkCatalogue.Entry? { value.withLock { $0.catalogue.entry(type) } }

    /// Takes what the store keeps now, unless it is older than what is held
    /// (a shared store's announcements and a reply may race).
    public func update(stored: [String: [String: String]], anchor: Int64) {
        let next = Self.current(defaults, stored, anchor)
        value.withLock { if anchor >= $0.anchor { $0 = next } }
    }

    /// Takes what the store keeps now, whatever was held: a standby that
    /// took its primary's whole state.
    public func replace(stored: [String: [String: String]], anchor: Int64) {
        let next = Self.current(defaults, stored, anchor)
        value.withLock { $0 = next }
    }
}
