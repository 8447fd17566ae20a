/// Elements validated one by one, in order, all or nothing: the outputs of
/// those that pass, or the first rule broken (placed at its element's index
/// when the elements came as an array). After an error, later elements are
/// only counted, so a reader can still read to the end of its text.
///
/// The one place that decides which error a batch reports, for bus
/// messages, query requests and inbox documents alike.
public struct ValidatedElements<Output> {
    public private(set) var items: [Output] = []
    public private(set) var error: ValidationError?
    private var count = 0
    /// False for a lone object: its error has no index.
    private let indexed: Bool

    public init(indexed: Bool = true, capacity: Int = 0) {
        self.indexed = indexed
        items.reserveCapacity(capacity)
    }

    /// Validates the next element, unless an earlier one failed.
    public mutating func add(_ validate: () throws(ValidationError) -> Output) {
        defer { count += 1 }
        guard error == nil else { return }
        do throws(ValidationError) {
            items.append(try validate())
        } catch {
            self.error = indexed ? error.at(index: count) : error
            items = []
        }
    }

    /// Validates the next element with `rule`; nil (an element that is not
    /// an object) breaks the first rule of all.
    public mutating func add<Input>(_ input: Input?, _ rule: (Input) throws(ValidationError) -> Output) {
        add { () throws(ValidationError) in
            guard let input else { throw ValidationError(rule: "must be an object") }
            return try rule(input)
        }
    }

    /// The outputs, or the first error.
    public func result() throws(ValidationError) -> [Output] {
        if let error { throw error }
        return items
    }
}
