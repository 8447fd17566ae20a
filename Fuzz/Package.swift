// swift-tools-version: 6.2
// `make fuzz SECONDS=N`: libFuzzer targets for every reader of outside input.
// A package of its own, because it builds with -sanitize=fuzzer,address and
// has no main of its own (libFuzzer's), which `swift build` of the service
// must never see.
import PackageDescription

let package = Package(
    name: "coffee-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "coffee-tracker", path: "..")],
    targets: [
        .executableTarget(
            name: "coffee-fuzz",
            dependencies: [
                .product(name: "CoffeeDomain", package: "coffee-tracker"),
                .product(name: "CoffeeService", package: "coffee-tracker"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6), .unsafeFlags(["-parse-as-library"])])
    ]
)
