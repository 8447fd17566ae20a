#!/bin/sh
# Builds coffee-tracker_VERSION_ARCH.deb from a release executable linked
# with Swift's static standard library and Foundation (docs/protocol.md §14).
#
#   deploy/debian/build-deb.sh EXECUTABLE OUT-FOLDER [VERSION]
#
# The version is the VERSION file's (or the one given, for an older
# commit's executable, which says it in --version); Depends are what dpkg-shlibdeps finds
# the executable links, and systemd (for systemd-sysusers and the units).
set -eu
binary=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
version=${3:-$(cat "$top/VERSION")}
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root

install -D -m 0755 "$binary" "$root/usr/bin/coffee-tracker"
strip --strip-unneeded "$root/usr/bin/coffee-tracker"

# The units, pointing at /usr/bin.
install -d "$root/lib/systemd/system"
for unit in coffee-tracker.service coffee-tracker@.service coffee-tracker-relay@.service \
    coffee-tracker-backup.service coffee-tracker-backup.timer; do
    sed 's|@BINDIR@|/usr/bin|' "$top/deploy/$unit" > "$root/lib/systemd/system/$unit"
    chmod 0644 "$root/lib/systemd/system/$unit"
done
install -D -m 0644 "$top/deploy/coffee-tracker.sysusers" "$root/usr/lib/sysusers.d/coffee-tracker.conf"
install -d "$root/usr/lib/tmpfiles.d"
sed 's|@INBOX_GROUP@|coffee-tracker|' "$top/deploy/coffee-tracker.tmpfiles" > "$root/usr/lib/tmpfiles.d/coffee-tracker.conf"
chmod 0644 "$root/usr/lib/tmpfiles.d/coffee-tracker.conf"

# The default configuration, a conffile: an upgrade keeps the operator's edits.
install -D -m 0644 "$top/deploy/coffee-tracker.json" "$root/etc/coffee-tracker/coffee-tracker.json"

# The docs, and the Python client's source (pip install /usr/share/coffee-tracker/python-client).
doc=$root/usr/share/doc/coffee-tracker
install -d "$doc"
install -m 0644 "$top/README.md" "$top/docs/protocol.md" "$top/docs/security.md" "$top/docs/operations.md" \
    "$top/docs/architecture.md" "$top/docs/recipes.md" "$doc/"
install -m 0644 "$here/copyright" "$doc/copyright"
date=$(date -u -R -d "@$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)")
printf 'coffee-tracker (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- Coffee Tracker developers <coffee-tracker@example.org>  %s\n' \
    "$version" "$version" "$date" | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
client=$root/usr/share/coffee-tracker/python-client
install -d "$client/coffee_tracker"
install -m 0644 "$top/clients/python/pyproject.toml" "$top/clients/python/README.md" "$client/"
echo "$version" > "$client/VERSION"
chmod 0644 "$client/VERSION"
install -m 0644 "$top/clients/python/coffee_tracker/"*.py "$top/clients/python/coffee_tracker/py.typed" \
    "$client/coffee_tracker/"

# Depends, from what the executable links.
mkdir -p "$stage/shlibs/debian"
printf 'Source: coffee-tracker\n\nPackage: coffee-tracker\nArchitecture: any\n' > "$stage/shlibs/debian/control"
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O -e "$root/usr/bin/coffee-tracker" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

install -d "$root/DEBIAN"
size=$(du -k -s --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" \
    "$here/control.in" > "$root/DEBIAN/control"
echo /etc/coffee-tracker/coffee-tracker.json > "$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do install -m 0755 "$here/$script" "$root/DEBIAN/$script"; done
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control" "$root/DEBIAN/conffiles"

mkdir -p "$out"
deb=$out/coffee-tracker_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
