#!/usr/bin/env bash
# Prints the path of an HAProxy 3.0 binary that runs on this machine: the
# haproxy of Debian trixie (the version pier's agent image ships, see
# hack/image.sh), next to the host's own (bookworm's 2.6), so that the
# suites and bench/ can run both (docs/operations.md, HAProxy versions).
#
#   hack/haproxy30.sh            # last line on stdout: the binary's path
#   PIER_HAPROXY=$(hack/haproxy30.sh | tail -n1) go test ./test/e2e
#
# Only Debian packages are used: mmdebstrap extracts haproxy and its
# libraries from trixie into .cache/haproxy30/<key>/root (no maintainer
# script runs, nothing is installed on the host). The binary is a copy of
# the root's usr/sbin/haproxy whose ELF interpreter and RPATH point into
# the root (set with the root's own patchelf, run through the root's
# dynamic loader), so it needs no wrapper: HAProxy's master re-executes
# itself on reload with the same path and arguments, and finds its loader
# and libraries again. It sits alone in a folder, bin/haproxy, so that
# PATH="$(dirname "$bin"):$PATH" makes it the `haproxy` of everything a
# test runs. The key is the suite, mirrors, package list, the mirror's
# package indexes and LAYOUT (bump it when the build below changes); a
# repeat run only checks the stamp and `haproxy -v`. Progress goes to
# stderr.
#
# Environment:
#   PIER_DEBIAN_MIRROR, PIER_DEBIAN_SECURITY_MIRROR  apt mirrors
#   PIER_HAPROXY30_REBUILD=1  build the root again
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
# The interpreter's path is written into the binary: take the real one,
# not the .cache symlink a worktree may have.
mkdir -p .cache/haproxy30
CACHE=$(realpath .cache/haproxy30)
SUITE=trixie
MIRROR=${PIER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${PIER_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# haproxy pulls its libraries (libc, OpenSSL, Lua, PCRE2, ...) as
# dependencies; patchelf rewrites the copy.
PACKAGES=haproxy,patchelf,libc-bin
LAYOUT=1
umask 022

log() { echo "haproxy30.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# index_digests prints the SHA-256 of each suite's binary package index
# (as hack/image.sh does): they change exactly when the packages do.
index_digests() {
    local url
    for url in "$MIRROR/dists/$SUITE" "$MIRROR/dists/$SUITE-updates" "$SECURITY_MIRROR/dists/$SUITE-security"; do
        curl -fsS --max-time 30 "$url/InRelease" | awk -v arch="$(dpkg --print-architecture)" \
            '/^SHA256:/ { on = 1; next } /^[^ ]/ { on = 0 } on && $3 == "main/binary-" arch "/Packages" { print $1 }' ||
            return 1
    done
}

# latest prints the newest complete build, for a machine without the
# mirror (the tests then still run the 3.0 they ran before).
latest() {
    local d
    d=$(ls -1td "$CACHE"/*/bin/haproxy 2>/dev/null | head -n1) || true
    [[ -n $d && -f $d/../../complete ]] && echo "$d"
}

# check BIN reports whether BIN runs and says it is HAProxy 3.0.
check() {
    "$1" -v 2>/dev/null | sed -n 1p | grep -q '^HAProxy version 3\.0\.'
}

build() {
    local dir=$1 started=$SECONDS
    rm -rf "$dir" && mkdir -p "$dir"
    local mmlog=$dir/mmdebstrap.log
    log "mmdebstrap $SUITE: $PACKAGES (log: $mmlog)"
    # --variant=extract: unpack the packages and their dependencies only;
    # no maintainer scripts, so no chroot and no users to create.
    if ! mmdebstrap --variant=extract --format=directory --include="$PACKAGES" \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        "$SUITE" "$dir/root" \
        "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
        "deb $SECURITY_MIRROR $SUITE-security main" >"$mmlog" 2>&1; then
        tail -n 30 "$mmlog" >&2
        die "mmdebstrap failed; see $mmlog"
    fi
    local root=$dir/root
    local ld=$root/usr/lib64/ld-linux-x86-64.so.2
    [[ -e $ld ]] || ld=$root/lib64/ld-linux-x86-64.so.2
    local libs=$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu
    mkdir -p "$dir/bin"
    install -m 0755 "$root/usr/sbin/haproxy" "$dir/haproxy.tmp"
    # RPATH (--force-rpath), not RUNPATH: it also serves the libraries'
    # own dependencies (libssl's libcrypto), which RUNPATH would leave to
    # the host's ld.so.cache.
    "$ld" --library-path "$libs" "$root/usr/bin/patchelf" \
        --set-interpreter "$ld" --force-rpath --set-rpath "$libs" "$dir/haproxy.tmp"
    mv "$dir/haproxy.tmp" "$dir/bin/haproxy"
    check "$dir/bin/haproxy" || die "$dir/bin/haproxy does not run as HAProxy 3.0: $("$dir/bin/haproxy" -v 2>&1 | head -n3)"
    touch "$dir/complete"
    log "built in $((SECONDS - started))s: $("$dir/bin/haproxy" -v | sed -n 1p)"
}

exec 9>"$CACHE/.lock"
flock 9
key=""
if idx=$(index_digests) && [[ -n $idx ]]; then
    key=$({ echo "$SUITE $MIRROR $SECURITY_MIRROR $PACKAGES $LAYOUT"; echo "$idx"; } | sha256sum | cut -c1-16)
fi
if [[ -z $key ]]; then
    bin=$(latest) || true
    [[ -n $bin ]] && check "$bin" || die "cannot read the $SUITE package indexes from $MIRROR and nothing is cached"
    log "mirror unreachable; using the cached $bin"
    echo "$bin"
    exit 0
fi
dir=$CACHE/$SUITE-$key
if [[ ${PIER_HAPROXY30_REBUILD:-0} != 1 && -f $dir/complete ]] && check "$dir/bin/haproxy"; then
    log "cached $dir/bin/haproxy"
else
    # One root at a time: the older ones are stale package sets.
    find "$CACHE" -mindepth 1 -maxdepth 1 -type d ! -path "$dir" -exec rm -rf {} +
    build "$dir"
fi
echo "$dir/bin/haproxy"
