import Foundation
import Testing

@testable import CoffeeService

/// config/README.md is the reference of the keys: every key the loader's
/// table has is a row there, and every row names a key the loader takes, so
/// the reference cannot fall behind the code again.
@Suite("The configuration's reference")
struct ConfigurationReferenceTests {
    /// The keys the reference's table names in its first column (`a` / `b`, `a`, `b` included).
    static func documented() throws -> Set<String> {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("config/README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        var keys: Set<String> = []
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let first = line.dropFirst(2).prefix { $0 != "|" }
            for (i, part) in first.split(separator: "`", omittingEmptySubsequences: false).enumerated() where i % 2 == 1 {
                keys.insert(String(part))
            }
        }
        return keys
    }

    @Test func everyKeyOfTheLoaderHasARowAndEveryRowIsAKey() throws {
        let documented = try Self.documented()
        let loaded = Set(ServiceConfiguration.keys.map(\.name))
        // A section the loader compares whole (`security.curve`) is documented by its members.
        func covers(_ key: String, _ row: String) -> Bool { row == key || row.hasPrefix(key + ".") }
        let undocumented = loaded.filter { key in !documented.contains { covers(key, $0) } }
        let unknown = documented.filter { row in !loaded.contains { covers($0, row) } }
        #expect(undocumented.sorted() == [], "keys without a row in config/README.md")
        #expect(unknown.sorted() == [], "rows of config/README.md that name no key")
        #expect(documented.count >= loaded.count - 1)
    }
}
