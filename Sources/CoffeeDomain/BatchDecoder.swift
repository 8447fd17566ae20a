import Foundation

/// Turns a message body or file document into validated drinks and
/// deletions, all-or-nothing: the first bad element fails the whole batch.
public struct BatchDecoder: Sendable {
    public var validator: DrinkValidator

    public init(validator: DrinkValidator = DrinkValidator()) {
        self.validator = validator
    }

    /// Drinks from a JSON object or array of objects.
    ///
    /// - Throws: `ValidationError`, with `index` set when the body was an array.
    public func drinks(json data: Data, now: Date, source: String) throws(ValidationError) -> [Drink] {
        try data.withUnsafeBytes { raw in
            Result { () throws(ValidationError) in try drinks(json: raw, now: now, source: source) }
        }.get()
    }

    /// Drinks from JSON bytes read in place (a message still in ZeroMQ's buffer).
    public func drinks(json bytes: UnsafeRawBufferPointer, now: Date, source: String) throws(ValidationError) -> [Drink] {
        try Self.read(DrinkInput.self, json: bytes) { input throws(ValidationError) in
            try validator.drink(from: input, now: now, defaultSource: source)
        }
    }

    /// Deletions from a JSON object or array of objects.
    public func deletions(json data: Data) throws(ValidationError) -> [Deletion] {
        try data.withUnsafeBytes { raw in Result { () throws(ValidationError) in try deletions(json: raw) } }.get()
    }

    /// Deletions from JSON bytes read in place.
    public func deletions(json bytes: UnsafeRawBufferPointer) throws(ValidationError) -> [Deletion] {
        try Self.read(DeletionInput.self, json: bytes) { input throws(ValidationError) in try validator.deletion(from: input) }
    }

    /// Applies `rule` to each element, placing the first error at its index.
    public func validate<Input, Output>(
        _ inputs: [Input?], isArray: Bool, _ rule: (Input) throws(ValidationError) -> Output
    ) throws(ValidationError) -> [Output] {
        var elements = ValidatedElements<Output>(indexed: isArray, capacity: inputs.count)
        for input in inputs {
            elements.add(input, rule)
            if elements.error != nil { break }
        }
        return try elements.result()
    }

    /// A JSON object, or an array of objects, read member by member (no
    /// tree, no array of inputs) and validated element by element as it is
    /// read. Text that is not JSON is reported first, wherever it is; then
    /// the first element that breaks a rule.
    public static func read<Input: JSONObjectInput, Output>(
        _: Input.Type, json bytes: UnsafeRawBufferPointer, _ rule: (Input) throws(ValidationError) -> Output
    ) throws(ValidationError) -> [Output] {
        var elements = ValidatedElements<Output>(indexed: true)
        var shaped = true
        do throws(JSONReader.SyntaxError) {
            var c = JSONReader.Cursor(bytes)
            switch c.peek() {
            case UInt8(ascii: "{"):
                elements = ValidatedElements(indexed: false, capacity: 1)
                let input = try c.object(Input.self)
                elements.add(input, rule)
            case UInt8(ascii: "["):
                try c.elements { (c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                    elements.add(try c.objectOrSkip(Input.self), rule)
                }
            default:
                // A bare value, where the input takes one (a deletion's UUID).
                if let input = Input.fromScalar(try c.value()) {
                    elements = ValidatedElements(indexed: false, capacity: 1)
                    elements.add(input, rule)
                } else {
                    shaped = false
                }
            }
            try c.end()
        } catch {
            if !bytes.contains(where: { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }) {
                throw ValidationError(rule: "body is empty; expected a JSON object or array")
            }
            throw ValidationError(rule: "body is not valid JSON (\(error))")
        }
        guard shaped else { throw ValidationError(rule: "body must be a JSON object or array") }
        return try elements.result()
    }

    /// Each element as a `T`, or nil where it is neither an object nor a
    /// value `T` takes in place of one.
    public static func objects<T: JSONObjectInput>(_: T.Type, _ items: [JSONValue]) -> [T?] {
        items.map { item in if case .object = item { T(json: item) } else { T.fromScalar(item) } }
    }

    /// A short reason for a decoding failure, without Foundation's noise.
    public static func describe(_ error: any Error) -> String {
        if let decoding = error as? DecodingError {
            switch decoding {
            case .dataCorrupted(let context):
                if let underlying = context.underlyingError as NSError?,
                    let detail = underlying.userInfo[NSDebugDescriptionErrorKey] as? String
                {
                    return detail
                }
                return context.debugDescription
            case .keyNotFound(_, let context), .typeMismatch(_, let context), .valueNotFound(_, let context):
                return context.debugDescription
            @unknown default:
                return "\(decoding)"
            }
        }
        return "\(error)"
    }
}

/// An array element that may fail to decode without failing the array.
public struct Lenient<T: Decodable & Sendable>: Decodable, Sendable {
    public var value: T?
    public init(from decoder: any Decoder) throws {
        value = try? T(from: decoder)
    }
}
