import CoffeeDomain
import Foundation
import HealthStore

/// A whole-file document: an array of drinks, or `{"drinks": [...], "deleted": [...]}`.
struct FileDocument: Decodable {
    var drinks: [DrinkInput?] = []
    var deleted: [DeletionInput?] = []
    var isArray = false

    enum Key: String, CodingKey { case drinks, deleted }

    init(from decoder: any Decoder) throws {
        if let array = try? decoder.singleValueContainer().decode([Lenient<DrinkInput>].self) {
            drinks = array.map(\.value)
            isArray = true
            return
        }
        guard let c = try? decoder.container(keyedBy: Key.self), c.contains(.drinks) || c.contains(.deleted) else {
            throw InboxFileError(Self.shapeError)
        }
        do {
            drinks = try c.decodeIfPresent([Lenient<DrinkInput>].self, forKey: .drinks)?.map(\.value) ?? []
        } catch {
            throw InboxFileError(Self.drinksError, field: "drinks")
        }
        do {
            deleted = try c.decodeIfPresent([Lenient<DeletionInput>].self, forKey: .deleted)?.map(\.value) ?? []
        } catch {
            throw InboxFileError(Self.deletedError, field: "deleted")
        }
    }

    static let shapeError = "file must hold an array of drinks or {\"drinks\": [...], \"deleted\": [...]}"
    static let drinksError = "drinks must be an array of drink objects"
    static let deletedError = "deleted must be an array of deletion objects"
}
