import CoffeeDomain
import Foundation
import HealthStore

/// A whole-file JSON document read in one pass, element by element, each
/// drink validated as it is read: memory is the batch of drinks, not a tree
/// of the file (a 20 MB array of 200k drinks took about 7 times its size as
/// a tree, inputs and drinks at once).
///
/// Problems are reported as `FileDocument` and `document(now:_:)` report
/// them for a property list, whichever comes first in the file: text that
/// is not JSON, then the document's shape, then a `drinks` or `deleted` that
/// is not an array, then the first bad drink, then the first bad deletion.
struct JSONDocumentReader {
    let parser: InboxFileParser
    let now: Date

    func read(_ bytes: UnsafeRawBufferPointer) throws(InboxFileError) -> WriteBatch {
        let validator = parser.decoder.validator
        let drink = { (input: DrinkInput) throws(ValidationError) in
            try validator.drink(from: input, now: now, defaultSource: "inbox")
        }
        let deletion = { (input: DeletionInput) throws(ValidationError) in try validator.deletion(from: input) }
        var drinks = ValidatedElements<Drink>()
        var deletions = ValidatedElements<Deletion>()
        var isArray = false
        var shaped = false
        var drinksWrong = false
        var deletedWrong = false
        do throws(JSONReader.SyntaxError) {
            var c = JSONReader.Cursor(bytes)
            switch c.peek() {
            case UInt8(ascii: "["):
                isArray = true
                shaped = true
                try Self.array(&c, into: &drinks, wrongType: &drinksWrong, drink)
            case UInt8(ascii: "{"):
                try c.members { (key: JSONKey, c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                    if key == "drinks" {
                        shaped = true
                        try Self.array(&c, into: &drinks, wrongType: &drinksWrong, drink)
                    } else if key == "deleted" {
                        shaped = true
                        try Self.array(&c, into: &deletions, wrongType: &deletedWrong, deletion)
                    } else {
                        _ = try c.value()
                    }
                }
            default:
                _ = try c.value()
            }
            try c.end()
        } catch {
            throw InboxFileError("file cannot be parsed (\(error))")
        }
        guard shaped else { throw InboxFileError(FileDocument.shapeError) }
        if drinksWrong { throw InboxFileError(FileDocument.drinksError, field: "drinks") }
        if deletedWrong { throw InboxFileError(FileDocument.deletedError, field: "deleted") }
        if let error = drinks.error { throw InboxFileError(error, prefix: isArray ? "" : "drinks ") }
        if let error = deletions.error { throw InboxFileError(error, prefix: "deleted ") }
        return WriteBatch(drinks: drinks.items, deletions: deletions.items)
    }

    /// The array of `drinks` or `deleted` (or the whole document), each
    /// element validated as it is read; null is none, anything else the
    /// wrong type. A name given twice: the last one counts.
    static func array<Input: JSONObjectInput, Output>(
        _ c: inout JSONReader.Cursor, into elements: inout ValidatedElements<Output>, wrongType: inout Bool,
        _ rule: (Input) throws(ValidationError) -> Output
    ) throws(JSONReader.SyntaxError) {
        elements = ValidatedElements()
        wrongType = false
        guard c.peek() == UInt8(ascii: "[") else {
            wrongType = try !c.value().isNull
            return
        }
        try c.elements { (c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
            elements.add(try c.objectOrSkip(Input.self), rule)
        }
    }
}
