import Foundation

extension UnsafeRawBufferPointer {
    /// Whether both hold the same bytes: the lengths, then one `memcmp`.
    /// The one comparison of bytes read in place (a bus topic, a drink's
    /// type, a JSON member's name): `elementsEqual` walked both a byte at a
    /// time through generic iterators and did not look at the lengths first.
    @inlinable
    public func sameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        count == other.count && (count == 0 || memcmp(baseAddress!, other.baseAddress!, count) == 0)
    }
}
