/// The pieces of compact JSON appended to bytes where they are written, with
/// no `String` in between: a literal is copied from the binary, an integer's
/// digits are written in place. A page of 10,000 drinks made two integer
/// strings and eight literal appends through `String.UTF8View` per drink; a
/// profile of a primary answering a standby's reads put most of the writing
/// thread's time in those appends and in copying the page as it grew.
public enum JSONBytes {
    /// Appends `literal` as it is (already JSON: a key, punctuation).
    @inline(__always)
    public static func append(_ literal: StaticString, to out: inout [UInt8]) {
        literal.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    /// Appends `value` in decimal: its digits made right to left in a
    /// buffer on the stack, then copied once.
    public static func append(_ value: Int64, to out: inout [UInt8]) {
        ByteSegment.writing(into: &out, capacity: 20) { $0.put(value) }
    }

    /// Appends `value` in its shortest round-tripping form, a whole number
    /// without a fraction, or `null` when it is not finite (JSON has no NaN).
    public static func append(_ value: Double, to out: inout [UInt8]) {
        if !value.isFinite {
            append("null", to: &out)
        } else if value == value.rounded(), abs(value) < 1e15 {
            append(Int64(value), to: &out)
        } else {
            out += String(value).utf8
        }
    }

    /// Appends `value` rounded to millionths, as `append(_: Double)` writes
    /// `(value * 1e6).rounded() / 1e6`: from the whole number of millionths,
    /// digit by digit, not through the general shortest form. That quotient
    /// is the double nearest a decimal of at most six places, and no shorter
    /// decimal is as near, so its shortest form is that decimal's digits
    /// with the trailing zeros dropped. Below 1e-4, where Swift writes an
    /// exponent, and beyond 1e9, the general form is written.
    public static func append(millionths value: Double, to out: inout [UInt8]) {
        let scaled = (value * 1e6).rounded()
        guard scaled.magnitude >= 100, scaled.magnitude < 1e15 else { return append(scaled / 1e6, to: &out) }
        let n = Int64(scaled)
        let (whole, fraction) = n.quotientAndRemainder(dividingBy: 1_000_000)
        if n < 0 && whole == 0 { out.append(UInt8(ascii: "-")) }
        append(whole, to: &out)
        guard fraction != 0 else { return }
        out.append(UInt8(ascii: "."))
        var digits = fraction.magnitude
        var places = 6
        while digits % 10 == 0 {
            digits /= 10
            places -= 1
        }
        let end = out.count + places
        out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: places))
        var i = end
        while digits != 0 {
            i -= 1
            out[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: digits % 10)
            digits /= 10
        }
    }
}
