import Testing

@testable import CoffeeCharts

/// The app's icon (docs/protocol.md §17) and the PNG it is written as; the
/// integration tests read the files back with zlib's own reader.
@Suite("The app's icon")
struct AppIconTests {
    @Test func theChecksumsAreZlibsAndPNGs() {
        // Published values: Adler-32 of "Wikipedia", CRC-32 of "IEND" (every PNG's last chunk).
        #expect(PNGImage.adler32(Array("Wikipedia".utf8)) == 0x11E6_0398)
        #expect(PNGImage.crc32(Array("IEND".utf8)) == 0xAE42_6082)
    }

    @Test func aLargePictureTakesSeveralStoredBlocksAndEndsWithIEND() {
        let png = PNGImage(width: 200, height: 200, fill: (1, 2, 3, 4)).png
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        // 200 rows of 801 bytes: three blocks of at most 65,535 bytes, five bytes of header each.
        #expect(png.count == 8 + 25 + (12 + 2 + 200 * 801 + 3 * 5 + 4) + 12)
        #expect(Array(png.suffix(8)) == [0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82])
    }

    @Test func theCupIsWhiteInsideTheSafeZoneOnTheGreen() {
        let image = AppIcon.image(size: 192)
        #expect(image[0, 0] == (0x2E, 0x7D, 0x32, 0xFF) && image[191, 191] == (0x2E, 0x7D, 0x32, 0xFF))
        #expect(image[86, 96] == (0xFF, 0xFF, 0xFF, 0xFF))  // the cup's body
        // Nothing white outside the middle 80%, where a launcher may cut.
        for y in 0..<192 {
            for x in 0..<192
            where Double(x) < 0.1 * 192 || Double(x) >= 0.9 * 192 || Double(y) < 0.1 * 192
                || Double(y) >= 0.9 * 192
            {
                #expect(image[x, y].red == 0x2E)
            }
        }
    }
}
