/// The app's icon (docs/protocol.md §17): a white cup with its handle and
/// steam on the level's green, drawn at any size. The whole square is
/// painted and the cup stays inside the middle 80% (the maskable safe
/// zone), so a launcher may cut it to a circle or a rounded square.
public enum AppIcon {
    /// The sizes the manifest names: what Chromium's install check asks for.
    public static let sizes = [192, 512]

    static let green: (UInt8, UInt8, UInt8, UInt8) = (0x2E, 0x7D, 0x32, 0xFF)
    static let white: (UInt8, UInt8, UInt8, UInt8) = (0xFF, 0xFF, 0xFF, 0xFF)

    /// The icon at `size` pixels square, as a PNG.
    public static func png(size: Int) -> [UInt8] { image(size: size).png }

    /// The picture itself: each pixel is in the cup or not, on a unit square.
    public static func image(size: Int) -> PNGImage {
        var image = PNGImage(width: size, height: size, fill: green)
        for y in 0..<size {
            for x in 0..<size {
                // The pixel's centre, on a unit square.
                let u = (Double(x) + 0.5) / Double(size)
                let v = (Double(y) + 0.5) / Double(size)
                if inCup(u, v) { image[x, y] = white }
            }
        }
        return image
    }

    /// The cup: a body with a round bottom, a ring for its handle, two wisps of steam.
    static func inCup(_ u: Double, _ v: Double) -> Bool {
        // The body: from 0.40 to 0.70 high, 0.26 to 0.64 wide, its bottom a half ellipse to 0.78.
        let (left, right, top, straight, bottom) = (0.26, 0.64, 0.40, 0.60, 0.78)
        let centre = (left + right) / 2
        let halfWidth = (right - left) / 2
        if u >= left && u <= right && v >= top && v <= straight { return true }
        if v > straight && v <= bottom {
            let dx = (u - centre) / halfWidth
            let dy = (v - straight) / (bottom - straight)
            if dx * dx + dy * dy <= 1 { return true }
        }
        // The handle: a ring on the right side.
        let (hx, hy) = (right, 0.53)
        let r = ((u - hx) * (u - hx) + (v - hy) * (v - hy)).squareRoot()
        if u > right && r >= 0.06 && r <= 0.10 { return true }
        // The steam: two short bars above the cup.
        for x in [0.38, 0.50] where abs(u - x) <= 0.022 && v >= 0.22 && v <= 0.34 { return true }
        return false
    }
}
