import CoffeeDomain
import Foundation
import HealthStore

/// The drink rules as the inbox's readers apply them (docs/protocol.md §5): a
/// JSON Lines line, a whole document; the formats themselves are `InboxFormat`.
public struct InboxFileParser: Sendable {
    public let decoder: BatchDecoder

    public init(decoder: BatchDecoder) {
        self.decoder = decoder
    }

    /// Names left alone until renamed: dot-files and files still being written.
    public static func isIgnored(_ name: String) -> Bool {
        name.hasPrefix(".") || name.hasSuffix("~")
            || [".tmp", ".part", ".partial"].contains { name.lowercased().hasSuffix($0) }
    }

    /// Reads `data` as `format` into one batch: for tests, and callers
    /// that want a file whole (the inbox streams what streams).
    ///
    /// - Throws: `InboxFileError`; also for JSON Lines with a drink after a
    ///   deletion, which one batch cannot hold in the file's order.
    public func parse(_ data: Data, format: InboxFormat, now: Date) throws(InboxFileError) -> WriteBatch {
        let reader = try format.reader(for: .bytes(data), InboxFormat.Context(parser: self, now: now))
        var all = WriteBatch()
        while let chunk = try reader.next() {
            guard all.acceptsDrinksInOrder || chunk.drinks.isEmpty else {
                throw InboxFileError("a drink after a deletion cannot be merged into one batch; stream the file instead")
            }
            all.drinks += chunk.drinks
            all.deletions += chunk.deletions
        }
        return all
    }

    /// What one line of a JSON Lines file holds.
    enum Line: Sendable {
        case blank
        case drink(Drink)
        case deletion(Deletion)
    }

    /// One line of a JSON Lines file: a drink, or `{"delete": "<uuid>"}`,
    /// read in place.
    func line(_ bytes: UnsafeRawBufferPointer, number: Int, now: Date) throws(InboxFileError) -> Line {
        guard bytes.contains(where: { $0 > 0x20 }) else { return .blank }  // blank lines are fine
        // Only a line with non-ASCII bytes can be invalid UTF-8.
        if bytes.contains(where: { $0 >= 0x80 }), String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self) == nil {
            throw InboxFileError("line \(number): not valid UTF-8", line: number)
        }
        do throws(ValidationError) {
            let line: LineInput?
            do throws(JSONReader.SyntaxError) {
                var c = JSONReader.Cursor(bytes)
                line = try c.objectOrSkip(LineInput.self)
                try c.end()
            } catch {
                throw ValidationError(rule: "line is not valid JSON (\(error))")
            }
            guard let line else { throw ValidationError(rule: "each line must be one JSON object") }
            if line.isDeletion { return .deletion(try decoder.validator.deletion(from: line.deletion)) }
            return .drink(try decoder.validator.drink(from: line.drink, now: now, defaultSource: "inbox"))
        } catch {
            throw InboxFileError(error.at(line: number))
        }
    }

    /// One JSON Lines object, read once (no tree) as both a drink and a
    /// deletion: it is a deletion when it has a `delete` member.
    struct LineInput: JSONObjectInput {
        var drink = DrinkInput()
        var deletion = DeletionInput()
        var isDeletion = false

        mutating func take(_ key: JSONKey, _ value: JSONValue) {
            if key == "delete" { isDeletion = true }
            drink.take(key, value)
            deletion.take(key, value)
        }
    }

    /// A whole document decoded by `decode` (a property list; JSON too, in
    /// tests, as the reference `JSONDocumentReader` is held to).
    func document(now: Date, _ decode: () throws -> FileDocument) throws(InboxFileError) -> WriteBatch {
        let doc: FileDocument
        do {
            doc = try decode()
        } catch let error as InboxFileError {
            throw error
        } catch {
            throw InboxFileError("file cannot be parsed (\(BatchDecoder.describe(error)))")
        }
        var batch = WriteBatch()
        do throws(ValidationError) {
            batch.drinks = try decoder.validate(doc.drinks, isArray: true) { input throws(ValidationError) in
                try decoder.validator.drink(from: input, now: now, defaultSource: "inbox")
            }
        } catch {
            throw InboxFileError(error, prefix: doc.isArray ? "" : "drinks ")
        }
        do throws(ValidationError) {
            batch.deletions = try decoder.validate(doc.deleted, isArray: true) { input throws(ValidationError) in
                try decoder.validator.deletion(from: input)
            }
        } catch {
            throw InboxFileError(error, prefix: "deleted ")
        }
        return batch
    }
}
