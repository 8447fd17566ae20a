/// A few pieces of JSON put together in memory the caller lends (on the
/// stack, through `withUnsafeTemporaryAllocation`), then appended to the
/// output in one piece. A drink in a `changes` message was about twelve
/// appends, each checking the array's uniqueness and capacity and calling
/// `memcpy` for a few bytes; a profile of the publisher at full speed put
/// two fifths of its drinks' writing in those appends.
public struct ByteSegment {
    private let base: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    /// The bytes put so far.
    public private(set) var count = 0

    /// - Precondition: `memory` has a base address; what is put never
    ///   exceeds its count (checked at each piece).
    public init(_ memory: UnsafeMutableBufferPointer<UInt8>) {
        base = memory.baseAddress!
        capacity = memory.count
    }

    /// Puts `literal` as it is (already JSON: a key, punctuation).
    @inline(__always)
    public mutating func put(_ literal: StaticString) {
        let n = literal.utf8CodeUnitCount
        precondition(count + n <= capacity, "ByteSegment: full")
        (base + count).update(from: literal.utf8Start, count: n)
        count += n
    }

    /// Puts one byte.
    @inline(__always)
    public mutating func put(byte: UInt8) {
        precondition(count < capacity, "ByteSegment: full")
        base[count] = byte
        count += 1
    }

    /// Puts `width` bytes that `write` makes in place, right to left or
    /// in any order, given where they start.
    @inline(__always)
    mutating func put(width: Int, _ write: (UnsafeMutablePointer<UInt8>) -> Void) {
        precondition(count + width <= capacity, "ByteSegment: full")
        write(base + count)
        count += width
    }

    /// Puts `value` in decimal (at most 20 bytes).
    public mutating func put(_ value: Int64) {
        if value < 0 { put(byte: UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var width = 1
        var rest = magnitude / 10
        while rest != 0 {
            width += 1
            rest /= 10
        }
        put(width: width) { start in
            var k = width
            repeat {
                k -= 1
                start[k] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while k > 0
        }
    }

    /// Appends what was put to `out` and starts again from empty.
    public mutating func flush(into out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: base, count: count))
        count = 0
    }

    /// Runs `body` with a segment of `capacity` bytes on the stack, then
    /// appends what it put to `out`.
    public static func writing(
        into out: inout [UInt8], capacity: Int, _ body: (inout ByteSegment) -> Void
    ) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { memory in
            var segment = ByteSegment(memory)
            body(&segment)
            segment.flush(into: &out)
        }
    }
}
