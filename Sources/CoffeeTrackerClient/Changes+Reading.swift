import CoffeeDomain
import Foundation

extension Changes {
    /// A `changes` message or reply read straight from its bytes, member by
    /// member, as the service's `BatchDecoder` reads the bus: no `JSONValue`
    /// tree, and the UUID, date and type of each drink parsed where they lie.
    /// A follower at full speed reads every message this way; decoding
    /// through the tree was most of its time. A test holds it to
    /// `init(_ reply: JSONValue)` on the same bytes.
    public init(json bytes: UnsafeRawBufferPointer) throws(WireFormat.DecodingError) {
        (added, addedAnchors, deleted, deletedAnchors) = ([], [], [], [])
        var anchor: Int64?
        var previousAnchor: Int64?
        var hasMore = false
        var store: UUID?
        var epoch: Int64?
        var failure: WireFormat.DecodingError?
        var kept = KeptRows()
        var reading = (added: [Drink](), addedAnchors: [Int64](), deleted: [Tombstone](), deletedAnchors: [Int64]())
        do throws(JSONReader.SyntaxError) {
            var c = JSONReader.Cursor(bytes)
            try c.members { (key: JSONKey, c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                if key == "added" || key == "deleted" {
                    let drinks = key == "added"
                    try c.elements { (c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                        let item = try c.object(WireChange.self)
                        guard failure == nil else { return }
                        do throws(WireFormat.DecodingError) {
                            if drinks {
                                reading.added.append(try item.drink())
                                reading.addedAnchors.append(try item.required(item.anchor, "anchor"))
                            } else {
                                reading.deleted.append(try item.tombstone())
                                reading.deletedAnchors.append(try item.required(item.anchor, "anchor"))
                            }
                        } catch {
                            failure = error
                        }
                    }
                } else if key == "anchor" {
                    anchor = try? c.value().integer()
                } else if key == "previousAnchor" {
                    previousAnchor = try? c.value().integer()
                } else if key == "hasMore" {
                    hasMore = (try? c.value().bool()) ?? false
                } else if key == "store" {
                    store = (try? c.value().text()).flatMap(UUIDText.parse)
                } else if key == "epoch" {
                    epoch = try? c.value().integer()
                } else if key == "settings" || key == "alertStates" || key == "outbox" {
                    let name = String(decoding: key.bytes, as: UTF8.self)
                    let value = try c.value()
                    guard failure == nil else { return }
                    do throws(WireFormat.DecodingError) { try kept.read(name, value) } catch { failure = error }
                } else {
                    _ = try c.value()
                }
            }
            try c.end()
        } catch {
            throw WireFormat.DecodingError("not JSON: \(error)")
        }
        if let failure { throw failure }
        guard let anchor else { throw WireFormat.DecodingError("missing \"anchor\"") }
        (added, addedAnchors, deleted, deletedAnchors) = reading
        self.anchor = anchor
        self.previousAnchor = previousAnchor
        self.hasMore = hasMore
        if let store, let epoch { identity = StoreIdentity(store: store, epoch: epoch) }
        self.kept = kept
    }
}

/// One element of `added` or `deleted` as read: each field, or what was
/// wrong with it, so that the error names the field as the tree's does.
private struct WireChange: JSONObjectInput {
    var uuid: UUID?
    var mgCaffeine: Double?
    var date: Date?
    var version: Int64?
    var type: DrinkType?
    var source: String?
    var anchor: Int64?
    var problem: String?

    init() {}

    mutating func take(_ key: JSONKey, text: UnsafeBufferPointer<UInt8>) -> Bool {
        if key == "uuid" {
            uuid = UUIDText.parse(bytes: text)
            if uuid == nil { problem = "not a UUID: \"\(String(decoding: text, as: UTF8.self))\"" }
        } else if key == "date" {
            date = RFC3339.parse(bytes: text)
            if date == nil { problem = "not an RFC 3339 date: \"\(String(decoding: text, as: UTF8.self))\"" }
        } else if key == "type" {
            type = DrinkType(name: text)
            if type == nil { problem = "not a drink type's name: \"\(String(decoding: text, as: UTF8.self))\"" }
        } else {
            return false
        }
        return true
    }

    mutating func take(_ key: JSONKey, _ value: JSONValue) {
        do throws(WireFormat.DecodingError) {
            if key == "mgCaffeine" {
                mgCaffeine = try value.number()
            } else if key == "version" {
                version = value.isNull ? nil : try value.integer()
            } else if key == "anchor" {
                anchor = try value.integer()
            } else if key == "source" {
                source = value.isNull ? nil : try value.text()
            } else if key == "uuid" {
                let text = try value.text()
                uuid = UUIDText.parse(text)
                if uuid == nil { problem = "not a UUID: \"\(text)\"" }
            } else if key == "date" {
                let text = try value.text()
                date = RFC3339.parse(text)
                if date == nil { problem = "not an RFC 3339 date: \"\(text)\"" }
            } else if key == "type", !value.isNull {
                let text = try value.text()
                type = DrinkType(rawValue: text)
                if type == nil { problem = "not a drink type's name: \"\(text)\"" }
            }
        } catch {
            problem = "\(String(decoding: key.bytes, as: UTF8.self)): \(error)"
        }
    }

    func required<T>(_ value: T?, _ name: String) throws(WireFormat.DecodingError) -> T {
        if let problem { throw WireFormat.DecodingError(problem) }
        guard let value else { throw WireFormat.DecodingError("missing \"\(name)\"") }
        return value
    }

    func drink() throws(WireFormat.DecodingError) -> Drink {
        var drink = Drink(
            uuid: try required(uuid, "uuid"), mgCaffeine: try required(mgCaffeine, "mgCaffeine"),
            date: try required(date, "date"), version: version ?? 1)
        drink.type = type
        drink.source = source
        return drink
    }

    func tombstone() throws(WireFormat.DecodingError) -> Tombstone {
        Tombstone(uuid: try required(uuid, "uuid"), version: version ?? 1)
    }
}
