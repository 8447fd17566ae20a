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
        let (inputs, isArray) = try Self.decode(DrinkInput.self, json: bytes)
        return try validate(inputs, isArray: isArray) { input throws(ValidationError) in
            try validator.drink(from: input, now: now, defaultSource: source)
        }
    }

    /// Deletions from a JSON object or array of objects.
    public func deletions(json data: Data) throws(ValidationError) -> [Deletion] {
        try data.withUnsafeBytes { raw in Result { () throws(ValidationError) in try deletions(json: raw) } }.get()
    }

    /// Deletions from JSON bytes read in place.
    public func deletions(json bytes: UnsafeRawBufferPointer) throws(ValidationError) -> [Deletion] {
        let (inputs, isArray) = try Self.decode(DeletionInput.self, json: bytes)
        return try validate(inputs, isArray: isArray) { input throws(ValidationError) in
            try validator.deletion(from: input)
        }
    }

    /// Applies `rule` to each element, placing the first error at its index.
    public func validate<Input, Output>(
        _ inputs: [Input?], isArray: Bool, _ rule: (Input) throws(ValidationError) -> Output
    ) throws(ValidationError) -> [Output] {
        var out: [Output] = []
        out.reserveCapacity(inputs.count)
        for (i, input) in inputs.enumerated() {
            do throws(ValidationError) {
                guard let input else { throw ValidationError(rule: "must be an object") }
                out.append(try rule(input))
            } catch {
                throw isArray ? error.at(index: i) : error
            }
        }
        return out
    }

    /// Decodes a JSON object, or an array of them, into `T`s, read member by
    /// member (no tree); an element that is not an object comes back as nil
    /// so that it can be named.
    public static func decode<T: JSONObjectInput>(_: T.Type, json data: UnsafeRawBufferPointer) throws(ValidationError) -> ([T?], Bool) {
        let read: (objects: [T?], isArray: Bool)?
        do throws(JSONReader.SyntaxError) {
            read = try JSONReader.objects(T.self, in: data)
        } catch {
            if !data.contains(where: { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }) {
                throw ValidationError(rule: "body is empty; expected a JSON object or array")
            }
            throw ValidationError(rule: "body is not valid JSON (\(error))")
        }
        guard let read else { throw ValidationError(rule: "body must be a JSON object or array") }
        return (read.objects, read.isArray)
    }

    /// `T`s from an object or an array of objects already read.
    public static func inputs<T: JSONObjectInput>(_: T.Type, from value: JSONValue) throws(ValidationError) -> ([T?], Bool) {
        switch value {
        case .object: return ([T(json: value)], false)
        case .array(let items): return (objects(T.self, items), true)
        default: throw ValidationError(rule: "body must be a JSON object or array")
        }
    }

    /// Each element as a `T`, or nil where it is not an object.
    public static func objects<T: JSONObjectInput>(_: T.Type, _ items: [JSONValue]) -> [T?] {
        items.map { item in if case .object = item { T(json: item) } else { nil } }
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
