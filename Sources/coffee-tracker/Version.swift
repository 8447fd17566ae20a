import CVersion

/// This release's version (semantic versioning): the VERSION file's, the
/// one place it is kept (the Debian package and the Python client read it too).
enum CoffeeTrackerVersion {
    static let number = String(cString: coffee_tracker_version())
}
