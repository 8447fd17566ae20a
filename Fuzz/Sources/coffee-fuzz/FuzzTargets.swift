import CoffeeDomain
import CoffeeService
import Foundation

/// One libFuzzer binary, eight targets, chosen by `FUZZ_TARGET`: every reader
/// of input from outside the process. Errors are the expected outcome of
/// most inputs; what the fuzzer looks for is a crash, a hang, or memory the
/// sanitizer objects to.
enum FuzzTarget: String, CaseIterable {
    /// `JSONReader.parse` and the member-by-member cursor, which must agree.
    case json
    /// A bus message body, as `drink.add` and as `drink.delete`.
    case bus
    /// An inbox `.json` document.
    case inboxJSON = "inbox-json"
    /// An inbox `.jsonl` file.
    case jsonLines = "jsonl"
    /// An inbox `.plist` (binary or XML).
    case plist
    /// `PropertyListCheck` alone, and Foundation's decoder (the service's)
    /// reading every value of whatever it lets through: what passes must
    /// never crash or hang it.
    case plistCheck = "plist-check"
    /// The configuration file.
    case config
    /// Health Auto Export's body (`POST /api/v1/health-auto-export`), read and made into drinks;
    /// every datum is a drink or named as skipped.
    case healthAutoExport = "health-auto-export"
}

nonisolated(unsafe) var target = FuzzTarget.json
let parser = InboxFileParser(decoder: BatchDecoder())
let now = Date(timeIntervalSince1970: 1_796_000_000)

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>)
    -> CInt
{
    let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? "json"
    guard let chosen = FuzzTarget(rawValue: name) else {
        fatalError("FUZZ_TARGET \(name) is not one of \(FuzzTarget.allCases.map(\.rawValue))")
    }
    target = chosen
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let data = Data(bytes)
    switch target {
    case .json:
        let tree = Result { () throws(JSONReader.SyntaxError) in try JSONReader.parse(bytes) }
        // The cursor reading objects in place must accept exactly what the tree reader accepts.
        var cursor = JSONReader.Cursor(bytes)
        let streamed = Result { () throws(JSONReader.SyntaxError) in
            _ = try cursor.value()
            try cursor.end()
        }
        switch (tree, streamed) {
        case (.success, .failure(let e)), (.failure(let e), .success):
            fatalError("the tree reader and the cursor disagree: \(e)")
        default: break
        }
    case .bus:
        _ = try? BatchDecoder().drinks(json: bytes, now: now, source: "bus")
        _ = try? BatchDecoder().deletions(json: bytes)
    case .inboxJSON:
        _ = try? parser.parse(data, format: .json, now: now)
    case .jsonLines:
        _ = try? parser.parse(data, format: .jsonLines, now: now)
    case .plist:
        _ = try? parser.parse(data, format: .propertyList, now: now)
    case .plistCheck:
        if (try? PropertyListCheck.check(data)) != nil {
            _ = try? PropertyListDecoder().decode(PlistTree.self, from: data)
        }
    case .config:
        _ = try? ConfigurationLoader.parse(data, file: "fuzz.json", relativeTo: "/nonexistent")
    case .healthAutoExport:
        if let export = try? HealthAutoExport.read(bytes) {
            let found = export.drinks(validator: DrinkValidator(), now: now)
            let caffeine = export.metrics.filter { $0.name == HealthAutoExport.caffeine }.reduce(0) { $0 + $1.data.count }
            guard found.drinks.count + found.skipped.count == caffeine else {
                fatalError(
                    "a datum was neither a drink nor skipped: \(found.drinks.count) + \(found.skipped.count) != \(caffeine)")
            }
        }
    }
    return 0
}

/// libFuzzer's own entry, declared here: SwiftPM links an executable's
/// `main` to this module's entry point, so the fuzzer is started from it
/// rather than from libFuzzer's `main`.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@_cdecl("coffee_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    _ = initialize(&count, arguments!)
    return runFuzzerDriver(&count, &arguments) { data, size in testOneInput(data, size) }
}

/// Any property-list value, decoded all the way down, so that the decoder
/// reads every part of the input (arrays and dictionaries expanded as trees).
struct PlistTree: Decodable {
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            while !array.isAtEnd { _ = try array.decode(PlistTree.self) }
        } else if let dictionary = try? decoder.container(keyedBy: Key.self) {
            for key in dictionary.allKeys { _ = try dictionary.decode(PlistTree.self, forKey: key) }
        } else {
            let value = try decoder.singleValueContainer()
            if (try? value.decode(String.self)) != nil || (try? value.decode(Double.self)) != nil
                || (try? value.decode(Bool.self)) != nil || (try? value.decode(Date.self)) != nil
            {
                return
            }
            _ = try value.decode(Data.self)
        }
    }
}
