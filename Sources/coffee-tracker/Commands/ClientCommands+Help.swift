import CoffeeDomain

/// Each client command's `--help`, and the options they share.
extension ClientCommands {
    static let common = """
          --config FILE      find the service through this configuration
          --query ENDPOINT   the query endpoint (default: from the configuration)
          --timeout SECONDS  how long to wait for an answer (default 5; 0 waits for ever)
          --key FILE         this client's secret certificate (NAME.key_secret), when
                             the service runs with security.curve
          --server-key KEY   the service's public key (default: endpoints.json
                             through --config)
          --json             print the raw JSON reply
          -h, --help         show this help
        """

    /// The command's help: a switch over every operation, so that a new one
    /// does not build without its text.
    static func help(_ op: QueryOperation) -> String {
        switch op {
        case .ping:
            """
            Usage: coffee-tracker ping

            Prints the store's anchor: the service answers, and how far its store is.
            """
        case .add:
            """
            Usage: coffee-tracker add (--type TYPE | --mg MG) [--date DATE] [--uuid UUID] [--version N] [--source TEXT]

            Adds one drink and prints the anchor of its durable commit.
              --type TYPE   a drink of the catalogue (`coffee-tracker catalogue`): by
                            default \(DrinkType.builtIn.map(\.rawValue).joined(separator: ", "))
              --mg MG       caffeine in mg (default: the catalogue's serving; needed
                            for a retired drink)
              --date DATE   RFC 3339 date with a zone (default now)
              --uuid UUID   identity (default a new one); re-adding the same UUID adds nothing
            """
        case .delete:
            """
            Usage: coffee-tracker delete UUID [--version N]

            Deletes a drink; prints whether it was live.
            """
        case .changes:
            """
            Usage: coffee-tracker changes [--since N] [--limit N]

            Lists changes after anchor N (default: every live drink), one per line:
            "+ UUID MG DATE" for a drink, "- UUID vVERSION" for a deletion. Pages
            through everything and prints the anchor to continue from.
            """
        case .model:
            """
            Usage: coffee-tracker model [--at DATE] [--svg FILE]

            Shows caffeine in the body, its level, cups today and the anchor.
              --svg FILE    draws the caffeine curve instead, 12 h back to 24 h ahead,
                            as an SVG picture into FILE (- for standard output): the
                            level bands, each drink, "now", and when caffeine falls
                            under model.sleepThresholdMg (from --config, default 50)
            """
        case .backup:
            """
            Usage: coffee-tracker backup NAME

            Asks the running service for a consistent copy of its store, as of one
            anchor, written to NAME in store.backupDirectory (default
            <dataDirectory>/backups) and fsynced before it answers; prints the
            file, its anchor and its size. NAME is a plain file name (no /, not
            starting with a dot); an existing backup is never replaced. The service
            goes on taking drinks meanwhile. Put a copy back with
            `coffee-tracker restore FILE --config CONFIG`, the service stopped.
            Needs the write role under security.curve.
            """
        case .drinks:
            """
            Usage: coffee-tracker drinks [--from DATE] [--to DATE]

            Lists the live drinks dated from --from to --to (default: the 24 hours
            up to now; at most 366 days), oldest first, one per line: "DATE MG mg
            TYPE UUID vVERSION". Correct one by adding it again with its UUID and
            a higher --version. For every drink of a longer time, use
            coffee-tracker export --csv (it reads them a page at a time).
            """
        case .history:
            """
            Usage: coffee-tracker history [--from DAY] [--to DAY] [--by day|week|month]

            Prints the person's history, a row a bucket of their calendar
            (model.timeZone; weeks from Monday): the mg taken in, cups (96 mg
            each), drinks, the peak level and the hours over the sleep threshold,
            and "over" where a day passed the daily limit (model.dailyLimitMg).
            DAY is a date (2025-03-31) or an RFC 3339 time; default: the 30 days
            up to now, by day.
            """
        case .settings, .putSettings:
            """
            Usage: coffee-tracker settings [--half-life HOURS] [--sleep-threshold MG]
                                           [--daily-limit MG] [--time-zone NAME]
                                           [--level-over MG] [--bedtime HH:MM|off] [--reset NAMES]

            Shows the person's settings, and what the configuration gives (model.*,
            alerts.levelOverMg, alerts.bedtime); with options, changes them in the
            store (one change with an anchor of its own; the model is rebuilt with
            them, the alerts go by them from the next model on). --time-zone takes
            an IANA name (Europe/Berlin); --level-over 0 turns that alert off, as
            --bedtime off does; --reset takes a comma-separated list of settings to put
            back to the configuration's (half-life,time-zone). Changing needs the
            admin role under security.curve.
            """
        case .catalogue, .putCatalogue:
            """
            Usage: coffee-tracker catalogue [NAME [--mg MG] [--retire | --restore] [--renamed-from OLD]]

            Lists the drinks of the catalogue with their serving (mg) and whether
            they are retired; with NAME, adds or changes that entry: --mg its
            serving (needed for a new one), --retire hides it from the page and
            from --type alone (past drinks keep it), --restore offers it again,
            --renamed-from OLD makes NAME from OLD and retires OLD. A NAME is a
            letter, then letters, digits, _ or -: flatWhite, cold-brew.
            """
        case .pushKey:
            """
            Usage: coffee-tracker push-key

            Prints the service's Web Push public key (base64url, an uncompressed
            P-256 point): what a page passes to PushManager.subscribe as its
            applicationServerKey (docs/protocol.md §17). The service makes the key
            at its first start, in <dataDirectory>/vapid.pem (mode 0600).
            """
        case .pushSubscribe, .pushUnsubscribe, .pushSubscriptions:
            """
            Usage: coffee-tracker push [--remove ID]

            Lists the browsers told of alerts by Web Push (docs/protocol.md §17):
            id, when registered, and the push service's endpoint. With --remove,
            that subscription is removed (its pushes stop). Needs the admin role
            to list. A browser registers itself from the live page.
              --remove ID   the subscription to remove
            """
        case .stats:
            """
            Usage: coffee-tracker status

            Shows the service's counters: received, stored, duplicates, rejected,
            files, subscribers, uptime and store size.
            """
        }
    }
}
