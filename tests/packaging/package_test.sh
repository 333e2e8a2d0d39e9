#!/usr/bin/env bash
# What an administrator installs: `cmake --install` and the Debian package
# built with CPack hold the server, the systemd unit, its defaults file and
# the Python SDK; the package depends on the runtime libraries it links; the
# unit passes systemd's own checks; the packaged binary and SDK run.
#   package_test.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
WORK=$(mktemp -d /tmp/headway-package-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# cmake --install into a prefix of our choosing.
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
for f in bin/headway lib/systemd/system/headway.service share/headway/headway.default \
         lib/python3/dist-packages/headway/__init__.py share/headway/grafana/headway.json; do
  [ -e "$WORK/prefix/$f" ] || fail "cmake --install did not install $f"
done

# The .deb, built from the same build tree.
(cd "$WORK" && cpack --config "$BUILD/CPackConfig.cmake" -B "$WORK/deb" >/dev/null 2>&1) ||
  fail "cpack failed"
DEB=$(ls "$WORK"/deb/headway_*_*.deb)
depends=$(dpkg-deb -f "$DEB" Depends)
for lib in libsqlite3-0 libssl3 libyaml-cpp libssh-4; do
  [[ "$depends" == *"$lib"* ]] || fail "Depends lacks $lib: $depends"
done
[ "$(dpkg-deb -f "$DEB" Package)" = headway ] || fail "package name"
dpkg-deb -x "$DEB" "$WORK/root"
dpkg-deb -e "$DEB" "$WORK/control"
[ -x "$WORK/control/postinst" ] || fail "no postinst"
sh -n "$WORK/control/postinst" || fail "postinst does not parse"
"$WORK/root/usr/bin/headway" --help | grep -q "server" || fail "packaged binary does not run"
PYTHONPATH="$WORK/root/usr/lib/python3/dist-packages" /usr/bin/python3 -c 'import headway' ||
  fail "packaged SDK does not import"
# Where the build made the SDK's compiled intake, the package holds it and the SDK uses it.
if compgen -G "$BUILD/python/headway/_intake*.so" >/dev/null; then
  PYTHONPATH="$WORK/root/usr/lib/python3/dist-packages" /usr/bin/python3 -c '
import headway.reporter as r
assert r.Intake is not r.PyIntake, r.Intake' || fail "packaged SDK does not use its compiled intake"
fi
# No world-writable file, no file owned by anyone but root.
if dpkg-deb -c "$DEB" | awk '{print $1, $2}' | grep -v ' root/root$'; then fail "non-root owner"; fi
writable=$(dpkg-deb -c "$DEB" | awk '$1 ~ /^[-d].......w./')
[ -z "$writable" ] || fail "world-writable: $writable"

# The unit as systemd reads it, pointed at the packaged binary.
unit="$WORK/root/usr/lib/systemd/system/headway.service"
grep -q '^Delegate=yes' "$unit" || fail "the unit does not delegate its cgroup subtree"
grep -q '^KillMode=process' "$unit" || fail "stopping the service would end the jobs"
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$WORK/unit"
  sed "s#/usr/bin/headway#$WORK/root/usr/bin/headway#" "$unit" >"$WORK/unit/headway.service"
  systemd-analyze verify "$WORK/unit/headway.service" || fail "systemd-analyze verify"
fi

# The defaults file's flags are ones the server takes.
# shellcheck disable=SC1090
source "$WORK/root/usr/share/headway/headway.default"
mkdir -m 700 "$WORK/data"
# shellcheck disable=SC2086
"$WORK/root/usr/bin/headway" server --data-dir "$WORK/data" $HEADWAY_ARGS --help >/dev/null ||
  fail "the defaults file's HEADWAY_ARGS are refused"
echo "package ok: $(basename "$DEB"), $(stat -c %s "$DEB") bytes"
