#if TEST_HOOKS
    import Foundation
    @_spi(Testing) import HealthStore

    /// The integration tests' hooks into a running service, on with
    /// `COFFEE_TRACKER_TEST_HOOKS=1`, and compiled into debug builds only
    /// (`TEST_HOOKS`): the shipped binary has none (`make shipped-check`).
    enum TestHooks {
        static let enabled = ProcessInfo.processInfo.environment["COFFEE_TRACKER_TEST_HOOKS"] == "1"

        /// SIGUSR1: the store's thread stalls for 5 s, as a wedged fsync would.
        static func signalled(_ store: HealthStore) {
            if enabled { store.stallThread(for: 5) }
        }

        /// The process kills itself (SIGKILL) once the import of a file of
        /// this name has begun, as a file that crashes a parser would.
        static let dieWhileImporting =
            enabled ? ProcessInfo.processInfo.environment["COFFEE_TRACKER_TEST_DIE_IMPORTING"] : nil
    }
#endif
