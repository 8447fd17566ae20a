// swift-tools-version: 6.2
import Foundation
import PackageDescription

/// The one version (the executable's `--version`, the Debian package's, the
/// Python client's): the VERSION file beside this manifest.
let version =
    (try? String(contentsOfFile: Context.packageDirectory + "/VERSION", encoding: .utf8))?
    .trimmingCharacters(in: .whitespacesAndNewlines) ?? "0.0.0"

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .treatAllWarnings(as: .error),
]

/// Test hooks (a commit that fails or holds, a stalled store thread, a
/// process that kills itself mid-import) are compiled into debug builds only,
/// which the tests run; the release build, the one shipped, has none of them
/// (`make shipped-check` looks with nm).
let withTestHooks = strict + [.define("TEST_HOOKS", .when(configuration: .debug))]

let package = Package(
    name: "coffee-tracker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "coffee-tracker", targets: ["coffee-tracker"]),
        // For the fuzz package (Fuzz/), which builds with -sanitize=fuzzer.
        .library(name: "CoffeeDomain", targets: ["CoffeeDomain"]),
        .library(name: "CoffeeService", targets: ["CoffeeService"]),
        // The client of PROTOCOL.md §10: typed calls and a follower of the feed, without the service.
        .library(name: "CoffeeTrackerClient", targets: ["CoffeeTrackerClient"]),
    ],
    targets: [
        // C libraries from Debian's packages (libzmq3-dev, libsqlite3-dev).
        .systemLibrary(name: "CZeroMQ", path: "Sources/CZeroMQ"),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        // A store in PostgreSQL (PROTOCOL.md §11): libpq (libpq-dev).
        .systemLibrary(name: "CPostgreSQL", path: "Sources/CPostgreSQL", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // Apple Health exports: libxml2's streaming reader (libxml2-dev), and the zip through libarchive (libarchive-dev).
        .systemLibrary(name: "CLibXML2", path: "Sources/CLibXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        // Its reader behind a header that names no libxml2 type (libxml2's headers pull in ICU's, which clash with Foundation's).
        .target(name: "CHealthXML", dependencies: ["CLibXML2"]),
        .systemLibrary(
            name: "CArchive", path: "Sources/CArchive", pkgConfig: "libarchive", providers: [.apt(["libarchive-dev"])]),
        // glibc's <malloc.h> (mallopt, malloc_trim): part of libc, nothing to link.
        .systemLibrary(name: "CMalloc", path: "Sources/CMalloc"),
        // The HTTP endpoint's server: libmicrohttpd (libmicrohttpd-dev) and GnuTLS (libgnutls28-dev) behind a header of its own.
        .target(name: "CHTTPServer", linkerSettings: [.linkedLibrary("microhttpd"), .linkedLibrary("gnutls")]),
        // Telling the person (PROTOCOL.md §16): HTTP out through libcurl (libcurl4-openssl-dev) and the
        // webhook's HMAC through GnuTLS, behind a header of its own; MQTT through libmosquitto (libmosquitto-dev).
        .target(name: "COutbound", linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("gnutls")]),
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto"),
        // Web Push's cryptography (docs/protocol.md §17): P-256, ES256, ECDH, HKDF and AES-128-GCM
        // through OpenSSL's libcrypto (libssl-dev), behind a header of its own.
        .target(name: "CWebPush", linkerSettings: [.linkedLibrary("crypto")]),
        // Linux calls Glibc's Swift module leaves out (sync_file_range), compiled with _GNU_SOURCE.
        .target(name: "CLinux"),
        // The VERSION file's version, compiled in (C defines carry values; Swift's do not).
        .target(name: "CVersion", cSettings: [.define("COFFEE_TRACKER_VERSION", to: "\"\(version)\"")]),

        // Thin Swift wrappers over them.
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ", "Syscall"], swiftSettings: strict),
        .target(name: "SQLite", dependencies: ["CSQLite"], swiftSettings: withTestHooks),
        .target(name: "PostgreSQL", dependencies: ["CPostgreSQL"], swiftSettings: strict),

        // One helper for raw system calls (EINTR retried, errno captured at once), and durable whole-file writes.
        .target(name: "Syscall", dependencies: ["CLinux"], swiftSettings: strict),
        // A swift-log–shaped logger (named so that it can never clash with swift-log's `Logging`).
        .target(name: "CoffeeLogging", dependencies: ["Syscall"], swiftSettings: strict),
        // Long-running parts as services in one ordered group (swift-service-lifecycle's semantics),
        // and the executor that gives an actor a thread of its own.
        .target(name: "CoffeeLifecycle", dependencies: ["CoffeeLogging", "Syscall"], swiftSettings: strict),

        // Pure domain: drinks, validation, dates, the caffeine model.
        .target(name: "CoffeeDomain", swiftSettings: strict),

        // The seed's complication, drawn: the caffeine curve as SVG (pure).
        .target(name: "CoffeeCharts", dependencies: ["CoffeeDomain"], swiftSettings: strict),

        // The anchored store (HealthKit's role in the seed).
        .target(
            name: "HealthStore",
            dependencies: ["CoffeeDomain", "SQLite", "PostgreSQL", "CoffeeLogging", "CoffeeLifecycle", "Syscall"],
            swiftSettings: withTestHooks),

        // The model (the seed's CoffeeData), its follower of the store and its cache (see the README's table).
        .target(
            name: "CoffeeModel", dependencies: ["CoffeeDomain", "HealthStore", "CoffeeLogging", "CoffeeLifecycle", "Syscall"],
            swiftSettings: strict),

        // Telling the person (PROTOCOL.md §16): the rules over the model, the outbox's deliverers
        // (webhook, ntfy) and the MQTT publisher with Home Assistant's discovery.
        .target(
            name: "CoffeeAlerts",
            dependencies: [
                "CoffeeDomain", "HealthStore", "CoffeeModel", "CoffeeLogging", "CoffeeLifecycle", "COutbound", "CMosquitto",
                "CWebPush",
            ],
            swiftSettings: withTestHooks),

        // What a client of the service needs, and nothing of the service: its calls, typed, and follow().
        .target(name: "CoffeeTrackerClient", dependencies: ["ZeroMQ", "CoffeeDomain", "Syscall"], swiftSettings: strict),

        // Endpoints, inbox, configuration and lifecycle.
        .target(
            name: "CoffeeService",
            dependencies: [
                "CoffeeDomain", "HealthStore", "CoffeeModel", "ZeroMQ", "CoffeeLogging", "CoffeeLifecycle", "Syscall",
                "CMalloc", "CoffeeCharts", "CHealthXML", "CArchive", "CoffeeTrackerClient", "CHTTPServer", "CoffeeAlerts",
                "CVersion",
            ],
            swiftSettings: withTestHooks),

        // Past one machine (PROTOCOL.md §11): the relay of the update feed.
        .target(
            name: "CoffeeRelay",
            dependencies: ["ZeroMQ", "CoffeeLogging", "CoffeeLifecycle"],
            swiftSettings: strict),

        // What tests share and the product never links: the clock that moves only when told
        // (swift-service-lifecycle's separate test-kit target).
        .target(name: "CoffeeTestKit", dependencies: ["CoffeeDomain"], swiftSettings: strict),

        .executableTarget(
            name: "coffee-tracker",
            dependencies: [
                "CoffeeService", "CoffeeDomain", "HealthStore", "ZeroMQ", "SQLite", "CoffeeLogging", "Syscall", "CoffeeCharts",
                "CoffeeTrackerClient", "CoffeeRelay", "CoffeeLifecycle", "CVersion",
            ],
            swiftSettings: strict),

        // `make bench`: load generator, subscribers and baselines.
        .executableTarget(
            name: "coffee-bench",
            dependencies: [
                "CoffeeService", "CoffeeDomain", "HealthStore", "ZeroMQ", "Syscall", "CoffeeTrackerClient", "CoffeeLogging",
            ],
            swiftSettings: strict),

        .testTarget(
            name: "CoffeeDomainTests", dependencies: ["CoffeeDomain"], resources: [.copy("Vectors")],
            swiftSettings: strict),
        .testTarget(name: "CoffeeChartsTests", dependencies: ["CoffeeCharts", "CoffeeDomain"], swiftSettings: strict),
        .testTarget(
            name: "HealthStoreTests",
            dependencies: ["HealthStore", "CoffeeDomain", "SQLite", "PostgreSQL", "CoffeeLogging", "CoffeeTestKit"],
            swiftSettings: strict),
        .testTarget(
            name: "CoffeeModelTests",
            dependencies: ["CoffeeModel", "HealthStore", "CoffeeDomain", "CoffeeLifecycle", "CoffeeLogging", "CoffeeTestKit"],
            swiftSettings: strict),
        .testTarget(
            name: "CoffeeAlertsTests",
            dependencies: [
                "CoffeeAlerts", "CoffeeModel", "HealthStore", "CoffeeDomain", "CoffeeLifecycle", "CoffeeLogging", "CoffeeTestKit",
            ],
            swiftSettings: strict),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ"], swiftSettings: strict),
        .testTarget(name: "SyscallTests", dependencies: ["Syscall"], swiftSettings: strict),
        .testTarget(
            name: "CoffeeRelayTests", dependencies: ["CoffeeRelay", "CoffeeDomain", "CoffeeLogging"], swiftSettings: strict),
        .testTarget(
            name: "CoffeeLifecycleTests", dependencies: ["CoffeeLifecycle", "CoffeeTestKit", "CoffeeLogging"],
            swiftSettings: strict),
        .testTarget(
            name: "CoffeeTrackerClientTests",
            dependencies: ["CoffeeTrackerClient", "CoffeeDomain", "CoffeeService", "CoffeeLogging"], swiftSettings: strict),
        .testTarget(
            name: "CoffeeServiceTests",
            dependencies: [
                "CoffeeService", "ZeroMQ", "CoffeeDomain", "HealthStore", "CoffeeModel", "CoffeeLifecycle", "CoffeeLogging",
            ],
            swiftSettings: strict),
    ]
)
