import CoffeeDomain
import Foundation
import HealthStore

/// Why an inbox file was refused: what `<name>.error.json` says.
public struct InboxFileError: Error, CustomStringConvertible, Sendable, Equatable {
    public var message: String
    public var index: Int?
    public var line: Int?
    public var field: String?

    public init(_ message: String, index: Int? = nil, line: Int? = nil, field: String? = nil) {
        self.message = message
        self.index = index
        self.line = line
        self.field = field
    }

    init(_ error: ValidationError, prefix: String = "") {
        self.init(prefix + error.description, index: error.index, line: error.line, field: error.field)
    }

    public var description: String { message }
}
