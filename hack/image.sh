#!/usr/bin/env bash
# Builds one of pier's container images as an OCI image archive, with no
# container daemon and no registry (docs/images.md):
#
#   hack/image.sh ROLE                       # ROLE: agent controller echo pause
#   hack/image.sh --check-reproducible ROLE  # build twice, compare digests
#                                            # (or PIER_IMAGE_CHECK=1)
#
# The last line on stdout is the absolute path of the archive; progress
# goes to stderr. The archive is a tar of an OCI image layout (oci-layout,
# index.json, blobs/sha256/...) plus a Docker manifest.json, so
# `ctr -n k8s.io images import`, `podman load -i` and `docker load -i` all
# take it. An SPDX SBOM is written beside it (<archive>.spdx.json) and into
# the image (/usr/share/doc/pier/sbom.spdx.json).
#
# Environment:
#   IMAGE_NAME   repository (default: pier for agent, pier-controller,
#                pier-pause, pier-echo); a bare name means docker.io/library/NAME
#   IMAGE_TAG    tag (default dev)
#   PIER_IMAGE_BIN  use this pier binary (it must be static) instead of
#                building one (not PIER_BIN: that is the tests' binary,
#                linked against the host's libc)
#   SOURCE_DATE_EPOCH  all timestamps (default: commit time of HEAD)
#   PIER_IMAGE_NOCACHE=1  build the agent's Debian root fresh
#   PIER_DEBIAN_MIRROR, PIER_DEBIAN_SECURITY_MIRROR  apt mirrors
#   PIER_LICENSE, PIER_SOURCE_URL  the licenses and source labels
set -euo pipefail
# Without this, a failure inside $(...) would not stop the script.
shopt -s inherit_errexit
# PIER_IMAGE_BIN may be relative to the caller's folder: resolve it before cd.
PIER_BIN=""
if [[ -n ${PIER_IMAGE_BIN:-} ]]; then PIER_BIN=$(realpath "$PIER_IMAGE_BIN"); fi
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache/images
SUITE=trixie
MIRROR=${PIER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${PIER_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
umask 022

log() { echo "image.sh: $*" >&2; }
die() { log "$*"; exit 1; }

usage() {
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# Fallback timestamp when there is no git history: 2025-01-01T00:00:00Z.
: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct 2>/dev/null || echo 1735689600)}"
export SOURCE_DATE_EPOCH
VERSION=$(git describe --always --dirty 2>/dev/null || echo dev)
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)

# normalize_name turns "pier" into "docker.io/library/pier" and "me/pier"
# into "docker.io/me/pier", the names containerd and Docker store.
normalize_name() {
    local name=$1 first=${1%%/*}
    if [[ $name != */* ]]; then
        echo "docker.io/library/$name"
    elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
        echo "docker.io/$name"
    else
        echo "$name"
    fi
}

# human prints a byte count in MB (10^6, as registries and docker show).
human() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }

# build_tools builds pier (unless PIER_IMAGE_BIN), the assembler and, for
# the pause image, the pause program. All are static Go binaries: the
# controller, echo and pause images hold no libc.
build_tools() {
    local started=$SECONDS
    mkdir -p "$CACHE/tools"
    export CGO_ENABLED=0
    if [[ -z $PIER_BIN ]]; then
        # Built into the cache, not bin/pier, which the tests run.
        go build -p 1 -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$CACHE/tools/pier" ./cmd/pier
        PIER_BIN=$CACHE/tools/pier
    fi
    [[ -x $PIER_BIN ]] || die "PIER_IMAGE_BIN=$PIER_BIN is not an executable"
    if ldd "$PIER_BIN" >/dev/null 2>&1; then
        die "$PIER_BIN is linked dynamically (ldd lists its libraries): the images hold no libc; build it with CGO_ENABLED=0"
    fi
    # Work on a copy: the given binary may be rebuilt meanwhile, and a
    # rebuild between our two layers' reads would change the image.
    if [[ $PIER_BIN != "$CACHE/tools/pier" ]]; then
        install -m 0755 "$PIER_BIN" "$CACHE/tools/pier"
        PIER_BIN=$CACHE/tools/pier
    fi
    go build -p 1 -trimpath -o "$CACHE/tools/ociimage" ./hack/ociimage
    go build -p 1 -trimpath -ldflags "-s -w" -o "$CACHE/tools/pause" ./hack/pause
    log "Go builds: $((SECONDS - started))s"
}

# packages prints the agent's package list, comma-separated.
packages() {
    grep -v -e '^#' -e '^[[:space:]]*$' "$ROOT/hack/image/agent.packages" | paste -sd, -
}

# index_digests prints the SHA-256 of each suite's binary package index,
# taken from its InRelease file: they change exactly when the archive's
# packages do. Prints nothing if the mirror cannot be read.
index_digests() {
    local url
    for url in "$MIRROR/dists/$SUITE" "$MIRROR/dists/$SUITE-updates" "$SECURITY_MIRROR/dists/$SUITE-security"; do
        curl -fsS --max-time 30 "$url/InRelease" | awk -v arch="$(dpkg --print-architecture)" \
            '/^SHA256:/ { on = 1; next } /^[^ ]/ { on = 0 } on && $3 == "main/binary-" arch "/Packages" { print $1 }' ||
            return 1
    done
}

# rootfs_key is the cache key of the agent's Debian root: suite, mirrors,
# package list, the mirror's package indexes, SOURCE_DATE_EPOCH and the
# scripts that shape it. Empty when the indexes cannot be read.
rootfs_key() {
    local idx
    idx=$(index_digests) || return 0
    [[ -n $idx ]] || return 0
    { echo "$SUITE $MIRROR $SECURITY_MIRROR $SOURCE_DATE_EPOCH $(packages)"; echo "$idx"
      cat "$ROOT/hack/image/scrub-rootfs.sh" "$0"; } | sha256sum | cut -c1-16
}

# make_rootfs DIR builds the agent's Debian root file system in DIR with
# mmdebstrap. --mode=root: we are root here and may mount /proc inside the
# chroot; --variant=essential: only Essential: yes packages (no apt) plus
# the list, whose maintainer scripts may rely on the essential set.
make_rootfs() {
    local dir=$1 started=$SECONDS
    # Quoted: these are dpkg's globs, not the shell's.
    local excludes=('/usr/share/man/*' '/usr/share/info/*' '/usr/share/locale/*' '/usr/share/doc/*'
                    '/usr/share/lintian/*' '/usr/share/bash-completion/*')
    local opts=() p
    for p in "${excludes[@]}"; do opts+=("--dpkgopt=path-exclude=$p"); done
    # Keep the copyright files: they are the packages' licenses.
    opts+=("--dpkgopt=path-include=/usr/share/doc/*/copyright")
    local mmlog=$CACHE/mmdebstrap.log
    log "mmdebstrap $SUITE: $(packages) (log: $mmlog)"
    if ! mmdebstrap --mode=root --variant=essential --format=directory \
        --include="$(packages)" "${opts[@]}" \
        --customize-hook="\"$ROOT/hack/image/scrub-rootfs.sh\" \"\$1\"" \
        "$SUITE" "$dir" \
        "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
        "deb $SECURITY_MIRROR $SUITE-security main" >"$mmlog" 2>&1; then
        tail -n 30 "$mmlog" >&2
        die "mmdebstrap failed; see $mmlog"
    fi
    # Once more after mmdebstrap's own cleanup, which runs after the hooks
    # and leaves var/lib/apt/lists/partial behind, owned by root or by
    # _apt from one run to the next.
    "$ROOT/hack/image/scrub-rootfs.sh" "$dir"
    log "Debian root: $((SECONDS - started))s, $(du -sh "$dir" | cut -f1)"
}

# agent_rootfs prints the folder of the agent's Debian root, built now or
# reused from .cache/images/rootfs/ when its key matches.
agent_rootfs() {
    local key dir
    key=$(rootfs_key)
    if [[ -z $key || ${PIER_IMAGE_NOCACHE:-0} == 1 ]]; then
        dir=$WORK/rootfs
        make_rootfs "$dir"
        echo "$dir"
        return
    fi
    dir=$CACHE/rootfs/$SUITE-$key
    # The marker sits beside the tree, not in it: the tree is the layer.
    if [[ -f $dir.complete ]]; then
        log "reusing Debian root $dir"
    else
        # One cached root at a time: they are ~150 MB each.
        rm -rf "$CACHE/rootfs"
        mkdir -p "$CACHE/rootfs"
        make_rootfs "$dir"
        touch "$dir.complete"
    fi
    echo "$dir"
}

# role_settings sets the image's name, runtime config and description.
role_settings() {
    case $ROLE in
    agent)
        DEFAULT_NAME=pier USER_SPEC="" ENTRYPOINT='["/usr/local/bin/pier"]' CMD='["agent"]'
        DESCRIPTION="pier agent: HAProxy, keepalived and nftables on Debian $SUITE, driven by pier" ;;
    controller)
        DEFAULT_NAME=pier-controller USER_SPEC=65532:65532 ENTRYPOINT='["/usr/local/bin/pier"]' CMD='["controller"]'
        DESCRIPTION="pier controller: the static pier binary alone, as user 65532" ;;
    echo)
        DEFAULT_NAME=pier-echo USER_SPEC=65532:65532 ENTRYPOINT='["/usr/local/bin/pier"]' CMD='["echo"]'
        DESCRIPTION="pier echo: an HTTP echo backend for tests (the controller image's contents, another command)" ;;
    pause)
        DEFAULT_NAME=pier-pause USER_SPEC=65535:65535 ENTRYPOINT='["/pause"]' CMD=''
        DESCRIPTION="pier pause: the kubelet's pod sandbox process" ;;
    *) usage ;;
    esac
    IMAGE_TAG=${IMAGE_TAG:-dev}
    NAME=$(normalize_name "${IMAGE_NAME:-$DEFAULT_NAME}")
}

# write_sbom OUT [DPKG_STATUS] writes the image's SPDX document.
write_sbom() {
    local out=$1 status=${2:-} binary=$PIER_BIN component=pier
    local args=()
    if [[ -n $status ]]; then args+=(--dpkg-status "$status" --distro debian-13); fi
    if [[ $ROLE == pause ]]; then binary=$CACHE/tools/pause component=pause; fi
    "$CACHE/tools/ociimage" sbom --image "$NAME:$IMAGE_TAG" --pier-bin "$binary" \
        --component "$component" --pier-version "$VERSION" --license "${PIER_LICENSE:-}" \
        --source "${PIER_SOURCE_URL:-}" --out "$out" "${args[@]}"
}

# stage_top DIR SBOM lays out the role's own layer: pier (or pause), the
# SBOM and, for the images without Debian, passwd, group and /tmp.
stage_top() {
    local dir=$1 sbom=$2
    install -d -m 0755 "$dir/usr/share/doc/pier"
    install -m 0644 "$sbom" "$dir/usr/share/doc/pier/sbom.spdx.json"
    if [[ $ROLE == pause ]]; then
        install -m 0755 "$CACHE/tools/pause" "$dir/pause"
    else
        install -d -m 0755 "$dir/usr/local/bin"
        install -m 0755 "$PIER_BIN" "$dir/usr/local/bin/pier"
    fi
    if [[ $ROLE == controller || $ROLE == echo ]]; then
        install -d -m 0755 "$dir/etc"
        install -m 0644 "$ROOT/hack/image/passwd" "$dir/etc/passwd"
        install -m 0644 "$ROOT/hack/image/group" "$dir/etc/group"
        install -d -m 1777 "$dir/tmp"
        install -d -m 0755 "$dir/home"
        install -d -m 0700 "$dir/home/nonroot"
    fi
    # Owners are what the layer records: root, but nonroot's home.
    chown -R 0:0 "$dir"
    if [[ -d $dir/home/nonroot ]]; then chown 65532:65532 "$dir/home/nonroot"; fi
}

# labels prints the OCI convention labels, one --label flag a line.
labels() {
    local created
    created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
    printf -- '--label\n%s\n' \
        "org.opencontainers.image.title=${NAME##*/}" \
        "org.opencontainers.image.description=$DESCRIPTION" \
        "org.opencontainers.image.version=$IMAGE_TAG" \
        "org.opencontainers.image.revision=$REVISION" \
        "org.opencontainers.image.created=$created" \
        "org.opencontainers.image.source=${PIER_SOURCE_URL:-https://pier.dev/pier}" \
        "org.opencontainers.image.licenses=${PIER_LICENSE:-NOASSERTION}"
    if [[ $ROLE == agent ]]; then
        printf -- '--label\n%s\n' "org.opencontainers.image.base.name=debian:$SUITE"
    fi
}

# build_image OUTDIR builds the role's image into OUTDIR and sets ARCHIVE
# and DIGEST.
build_image() {
    local outdir=$1 started=$SECONDS base="" layers=()
    WORK=$(mktemp -d "$CACHE/.work-XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
    mkdir -p "$outdir"
    ARCHIVE=$outdir/${NAME##*/}-$IMAGE_TAG.oci.tar
    if [[ $ROLE == agent ]]; then
        base=$(agent_rootfs)
        layers+=(--layer "$base" --layer-comment "mmdebstrap --variant=essential $SUITE: $(packages)")
    fi
    write_sbom "$ARCHIVE.spdx.json" "${base:+$base/var/lib/dpkg/status}"
    stage_top "$WORK/top" "$ARCHIVE.spdx.json"
    layers+=(--layer "$WORK/top" --layer-comment "pier $VERSION ($ROLE)")
    local lbls=()
    mapfile -t lbls < <(labels)
    local facts
    facts=$("$CACHE/tools/ociimage" build --name "$NAME" --tag "$IMAGE_TAG" --out "$ARCHIVE" \
        --entrypoint "$ENTRYPOINT" --cmd "$CMD" --user "$USER_SPEC" \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        "${lbls[@]}" "${layers[@]}")
    rm -rf "$WORK"
    DIGEST=$(sed -n 's/^digest=//p' <<<"$facts")
    local compressed uncompressed
    compressed=$(sed -n 's/^compressed=//p' <<<"$facts")
    uncompressed=$(sed -n 's/^uncompressed=//p' <<<"$facts")
    log "$NAME:$IMAGE_TAG $DIGEST"
    log "  size: $(human "$compressed") compressed ($compressed bytes), $(human "$uncompressed") uncompressed ($uncompressed bytes)"
    log "  archive: $ARCHIVE ($(human "$(stat -c %s "$ARCHIVE")")), built in $((SECONDS - started))s"
}

main() {
    local check=${PIER_IMAGE_CHECK:-0}
    if [[ ${1:-} == --check-reproducible ]]; then check=1; shift; fi
    [[ $# == 1 ]] || usage
    ROLE=$1
    role_settings
    mkdir -p "$CACHE"
    local started=$SECONDS
    build_tools
    if [[ $check != 1 ]]; then
        build_image "$CACHE"
        log "total: $((SECONDS - started))s"
        echo "$ARCHIVE"
        return
    fi
    # Two full builds into separate folders; the Debian root is built
    # fresh for each, so mmdebstrap's own reproducibility is checked too.
    export PIER_IMAGE_NOCACHE=1
    build_image "$CACHE/check-1"
    local first=$DIGEST first_archive=$ARCHIVE
    build_image "$CACHE/check-2"
    echo "build 1: $first"
    echo "build 2: $DIGEST"
    log "total: $((SECONDS - started))s"
    if [[ $first != "$DIGEST" ]]; then
        log "NOT reproducible: the two builds' manifest digests differ"
        exit 1
    fi
    log "reproducible: both builds give $DIGEST"
    echo "$first_archive"
}

main "$@"
