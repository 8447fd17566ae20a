# coffee-tracker — build, run and test on a fresh Debian machine (as root).
SWIFT ?= swift
CONFIG ?= config/coffee-tracker.json
APT_PACKAGES := libzmq3-dev libsqlite3-dev libxml2-dev libarchive-dev libmicrohttpd-dev libgnutls28-dev pkg-config chromium chromium-driver fuse3 openssl caddy nginx-light curl nodejs mmdebstrap lintian postgresql libpq-dev libcurl4-openssl-dev libmosquitto-dev mosquitto libssl-dev
PY_PACKAGES := pyzmq pytest pytest-timeout prometheus_client selenium mfusepy pyyaml jinja2 paho-mqtt cryptography http_ece

.PHONY: all deps build release run test test-repeat lint format unit integration pyenv bench bench-deps soak powercut tsan fuzz install clean shipped-check failover deb deb-previous version-check

all: build

## Install what is missing: Debian packages, then Python test tools.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@python3 -c "import zmq, pytest, pytest_timeout, prometheus_client, selenium, mfusepy, yaml, jinja2, paho.mqtt, cryptography, http_ece" 2>/dev/null || python3 -m pip install -q $(PY_PACKAGES)
	@command -v cc >/dev/null || command -v gcc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null; }

## Package.swift reads VERSION: a new version must make SwiftPM read the manifest again.
version-check:
	@[ Package.swift -nt VERSION ] || touch Package.swift

build: deps version-check
	$(SWIFT) build

## The release build links Swift's standard library and Foundation statically, as the Debian
## package does (deb below): what `make run` and the benchmarks run is what is shipped. Calls into
## the runtime are direct and its thread-locals need no __tls_get_addr: at 1,000 drinks a second
## the process used about 3% less CPU than linked dynamically (bench/README.md, session 30).
release: deps version-check
	$(SWIFT) build -c release --static-swift-stdlib

## The Debian package (docs/protocol.md §14): the executable linked with Swift's static standard
## library and Foundation, built apart (.build/deb), packaged by deploy/debian/build-deb.sh.
deb: deps version-check
	$(SWIFT) build -c release --product coffee-tracker --static-swift-stdlib --scratch-path .build/deb
	deploy/debian/build-deb.sh .build/deb/release/coffee-tracker .build/deb/out

## The previous commit's package, for the upgrade test (kept in .build/deb/previous by commit).
deb-previous: deps
	@rev=$$(git rev-parse --short HEAD~1); out=.build/deb/previous/$$rev; \
	if ! ls $$out/*.deb >/dev/null 2>&1; then \
	  rm -rf .build/deb/previous-tree && git worktree add -f --detach .build/deb/previous-tree HEAD~1 >/dev/null && \
	  (cd .build/deb/previous-tree && $(SWIFT) build -c release --product coffee-tracker --static-swift-stdlib \
	    --scratch-path ../previous-build) && \
	  script=.build/deb/previous-tree/deploy/debian/build-deb.sh; [ -x $$script ] || script=deploy/debian/build-deb.sh; \
	  $$script .build/deb/previous-build/release/coffee-tracker $$out \
	    $$(.build/deb/previous-build/release/coffee-tracker --version | cut -d' ' -f2); \
	  git worktree remove --force .build/deb/previous-tree; \
	fi; ls $$out/*.deb

## Run the service in the foreground on the embedded defaults.
run: release
	.build/release/coffee-tracker serve --config $(CONFIG)

## Every test: the format check, Swift unit tests, then the real service over real sockets.
test: lint unit integration

## The checked-in .swift-format, applied (format) or checked (lint; warnings fail).
SWIFT_FORMAT_PATHS := Package.swift Sources Tests Fuzz/Package.swift Fuzz/Sources
format:
	$(SWIFT) format --in-place --recursive --configuration .swift-format $(SWIFT_FORMAT_PATHS)

lint:
	$(SWIFT) format lint --strict --recursive --configuration .swift-format $(SWIFT_FORMAT_PATHS)

## The store's rules run on both stores: on SQLite, and on a PostgreSQL server of the tests'
## own (Tests/postgres/server.sh, a socket folder and no TCP port), started here and stopped after.
## Sessions that wait for a synchronous standby are the tests' choice: the server names one that never comes.
unit: deps
	$(SWIFT) build --build-tests
	@pg=$$(mktemp -d /tmp/ct-pg-unit-XXXXXX) && chmod 755 $$pg && \
	conninfo=$$(Tests/postgres/server.sh start $$pg/server synchronous_commit=local synchronous_standby_names=ghost max_connections=300) || exit 1; \
	COFFEE_TRACKER_TEST_POSTGRES="$$conninfo" $(SWIFT) test < /dev/null; rc=$$?; \
	Tests/postgres/server.sh stop $$pg/server immediate; rm -rf $$pg; exit $$rc

## The Python client (clients/python) installed as a user would, into a
## virtual environment that sees the test tools; the integration tests run there.
PYENV := .build/pyenv
pyenv: deps
	@test -x $(PYENV)/bin/python || python3 -m venv --system-site-packages $(PYENV)
	@$(PYENV)/bin/python -m pip uninstall -q -y coffee-tracker-client 2>/dev/null || true
	@$(PYENV)/bin/python -m pip install -q --disable-pip-version-check ./clients/python
	@rm -rf clients/python/build clients/python/*.egg-info

integration: build pyenv
	COFFEE_TRACKER=$(CURDIR)/.build/debug/coffee-tracker $(PYENV)/bin/python -m pytest -q -rs --timeout=300 Tests/integration

## The integration suite N times back to back (Tests/repeat.py): every test that failed in any run, named.
N ?= 5
test-repeat: build pyenv
	COFFEE_TRACKER=$(CURDIR)/.build/debug/coffee-tracker $(PYENV)/bin/python Tests/repeat.py --runs $(N) -- Tests/integration

## Failover, round after round (Tests/failover/failover.py): kill -9 the primary under steady writes,
## promote the standby, count what was lost against the standby's lag, rejoin the old primary.
ROUNDS ?= 100
failover: build pyenv
	$(PYENV)/bin/python Tests/failover/failover.py --rounds $(ROUNDS) --binary $(CURDIR)/.build/debug/coffee-tracker

## The shipped (release) binary carries none of the test hooks (Package.swift's TEST_HOOKS):
## their symbols are in the debug build, which the tests run, and not here. Run by .ci/run.
TEST_HOOK_SYMBOLS := stallThread|TestClock|setCommitHook|commitFailure|afterBackupChunk|TestHooks|failNextCommitsAsDiskFull|dieWhileImporting
shipped-check: release build
	@test "$$(nm .build/debug/coffee-tracker | grep -cE '$(TEST_HOOK_SYMBOLS)')" -gt 0 || { echo "shipped-check: the debug build has no test hooks: the pattern is stale"; exit 1; }
	@if nm .build/release/coffee-tracker | grep -E '$(TEST_HOOK_SYMBOLS)'; then echo "shipped-check: test hooks in the release binary (above)"; exit 1; fi
	@if strings .build/release/coffee-tracker | grep COFFEE_TRACKER_TEST; then echo "shipped-check: a test hook's variable in the release binary"; exit 1; fi
	@echo "shipped-check: the release binary has no test hooks"

## Benchmarks (never part of `make test`): release build, real processes, loopback.
bench: release bench-deps
	.build/release/coffee-bench --out bench/results.json
	python3 bench/peers.py --trials 5 --out bench/peers.json
	python3 bench/allocations.py --out bench/allocations.json
	python3 bench/consumers.py --out bench/consumers.json
	python3 bench/health.py --out bench/health.json
	python3 bench/relay.py --subscribers 1000 --out bench/relay.json
	python3 bench/relay.py --subscribers 100 --out bench/relay-100.json
	python3 bench/standby.py --out bench/standby.json
	python3 bench/backup.py --out bench/backup.json
	python3 bench/door.py --out bench/door.json
	python3 bench/postgresql.py --out bench/postgresql.json
	python3 bench/history.py --out bench/history.json
	python3 bench/alerts.py --out bench/alerts.json
	python3 bench/push.py --out bench/push.json
	python3 bench/csv_import.py --out bench/csv-import.json
	python3 bench/export.py --out bench/export.json
	python3 bench/whole_store.py --out bench/whole-store.json
	python3 bench/page.py --out bench/page.json

## The baselines of bench/health.py (xmllint, unzip, healthkit-to-sqlite), bench/backup.py (sqlite3), bench/door.py (openssl)
## and bench/postgresql.py (psycopg).
BENCH_APT := libxml2-utils unzip sqlite3 openssl
bench-deps:
	@for p in $(BENCH_APT); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi
	@command -v healthkit-to-sqlite >/dev/null || python3 -m pip install -q healthkit-to-sqlite
	@python3 -c "import psycopg" 2>/dev/null || python3 -m pip install -q "psycopg[binary]"

## The Swift tests under ThreadSanitizer (never part of `make test`: a separate build, minutes).
tsan: deps
	$(SWIFT) build --build-tests --sanitize=thread --build-path .build/tsan
	TSAN_OPTIONS=halt_on_error=1 $(SWIFT) test --skip-build --sanitize=thread --build-path .build/tsan < /dev/null

## SIGKILL during mixed bus, query and inbox load, ROUNDS times (default 50), with the checks.
ROUNDS ?= 50
soak: release
	python3 Tests/soak/soak.py --binary .build/release/coffee-tracker --rounds $(ROUNDS)

## Power cuts under mixed load, CUTS times (default 100): the data directory and
## the inbox on a FUSE file system that loses what was not synced
## (Tests/powercut/lazyfs.py), with the checks after each (needs /dev/fuse, as root).
CUTS ?= 100
powercut: release
	python3 Tests/powercut/powercut.py --binary .build/release/coffee-tracker --cuts $(CUTS)

## libFuzzer targets for every reader of outside input, SECONDS each (default 60),
## seeded from Fuzz/corpus (nesting-heavy seeds: Fuzz/make_nesting_seeds.py);
## a crash stops the run and leaves its input in .build/fuzz/TARGET.
SECONDS ?= 60
FUZZ_TARGETS := json bus inbox-json jsonl plist plist-check config health-auto-export
## Property-list inputs may reach 256 KiB: nesting past what crashed Foundation takes more than 64 KiB.
fuzz: deps
	cd Fuzz && $(SWIFT) build -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p .build/fuzz/$$t; \
	  case $$t in plist*) max_len=262144;; *) max_len=65536;; esac; \
	  echo "fuzz: $$t for $(SECONDS) s (inputs up to $$max_len bytes)"; \
	  FUZZ_TARGET=$$t Fuzz/.build/debug/coffee-fuzz .build/fuzz/$$t Fuzz/corpus/$$t \
	    -max_total_time=$(SECONDS) -max_len=$$max_len -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=.build/fuzz/$$t- -print_final_stats=1 > .build/fuzz/$$t.log 2>&1; rc=$$?; \
	  grep -E "Done|stat::number_of_executed_units|stat::new_units_added|Fatal error|ERROR|crash" .build/fuzz/$$t.log; \
	  [ $$rc -eq 0 ] || { echo "fuzz: $$t failed: the input is in .build/fuzz/$$t-*, the log in .build/fuzz/$$t.log"; exit 1; }; \
	done

## Install as a system service: the binary, the unit (Type=notify, sandboxed), the
## production configuration, a system user and the state folders. DESTDIR stages it.
PREFIX ?= /usr/local
DESTDIR ?=
INBOX_GROUP ?= coffee-tracker
## One instance per person: `make install INSTANCES="alice bob"` writes /etc/coffee-tracker/alice.json…
INSTANCES ?=
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
RELEASE_BINARY ?= .build/release/coffee-tracker
install: $(if $(filter .build/release/coffee-tracker,$(RELEASE_BINARY)),release)
	install -D -m 0755 $(RELEASE_BINARY) $(DESTDIR)$(PREFIX)/bin/coffee-tracker
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR) $(DESTDIR)/etc/coffee-tracker $(DESTDIR)$(PREFIX)/share/doc/coffee-tracker
	sed 's|@BINDIR@|$(PREFIX)/bin|' deploy/coffee-tracker.service > $(DESTDIR)$(SYSTEMD_UNIT_DIR)/coffee-tracker.service
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/coffee-tracker.service
	test -e $(DESTDIR)/etc/coffee-tracker/coffee-tracker.json || install -m 0644 deploy/coffee-tracker.json $(DESTDIR)/etc/coffee-tracker/coffee-tracker.json
	install -D -m 0644 deploy/coffee-tracker.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/coffee-tracker.conf
	install -d $(DESTDIR)$(PREFIX)/lib/tmpfiles.d
	sed 's|@INBOX_GROUP@|$(INBOX_GROUP)|' deploy/coffee-tracker.tmpfiles > $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/coffee-tracker.conf
	install -m 0644 README.md docs/protocol.md docs/security.md docs/operations.md docs/architecture.md $(DESTDIR)$(PREFIX)/share/doc/coffee-tracker/
	for unit in coffee-tracker@.service coffee-tracker-relay@.service coffee-tracker-backup.service coffee-tracker-backup.timer; do \
	  sed 's|@BINDIR@|$(PREFIX)/bin|' deploy/$$unit > $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$unit && chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$unit; \
	done
	@i=0; for name in $(INSTANCES); do \
	  i=$$((i + 1)); config=$(DESTDIR)/etc/coffee-tracker/$$name.json; \
	  if [ -e $$config ]; then echo "kept $$config"; continue; fi; \
	  sed -e "s|/var/lib/coffee-tracker/|/var/lib/coffee-tracker/$$name/|" \
	      -e "s|127.0.0.1:5555|127.0.0.1:$$((5555 + 10 * i))|" -e "s|127.0.0.1:5556|127.0.0.1:$$((5556 + 10 * i))|" \
	      -e "s|127.0.0.1:5557|127.0.0.1:$$((5557 + 10 * i))|" -e "s|127.0.0.1:5558|127.0.0.1:$$((5558 + 10 * i))|" \
	      deploy/coffee-tracker.json > $$config; \
	  chmod 0644 $$config; echo "wrote $$config (endpoints on 127.0.0.1:$$((5555 + 10 * i))-$$((5558 + 10 * i))): systemctl enable --now coffee-tracker@$$name"; \
	done
	@echo "installed under $(DESTDIR)$(PREFIX); next: systemd-sysusers && systemd-tmpfiles --create && systemctl daemon-reload && systemctl enable --now coffee-tracker"

clean:
	$(SWIFT) package clean
