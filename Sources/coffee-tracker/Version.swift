/// This release's version (semantic versioning).
enum CoffeeTrackerVersion {
    static let number = "1.1.0"
}
