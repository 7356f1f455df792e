#!/usr/bin/env bash
# Builds (once) the Kubernetes control plane that pier's integration tests run
# against: kube-apiserver and kube-controller-manager from the k8s.io/kubernetes
# version pinned in hack/kube/go.mod, plus etcd from Debian's etcd-server.
#
# Binaries are cached in .cache/kube/<version>/ (this script owns that folder);
# a repeat run only checks the stamp and the binaries' reported version.
# Progress goes to stderr; the LAST line on stdout is the absolute path of the
# kube-apiserver binary (kube-controller-manager sits beside it), so callers
# can do: apiserver=$(hack/test-apiserver.sh | tail -n1).
#
# Environment:
#   PIER_KUBE_BUILD_P   parallelism for go build (default 2; the machine is shared)
#   PIER_KUBE_REBUILD=1 rebuild even if the cache looks good
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
modDir="$root/hack/kube"
log() { printf 'test-apiserver: %s\n' "$*" >&2; }

# The version is read from go.mod so there is exactly one place to bump it.
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$modDir/go.mod")
if [[ ! $version =~ ^v1\.[0-9]+\.[0-9]+$ ]]; then
	log "cannot read the pinned k8s.io/kubernetes version from $modDir/go.mod"
	exit 1
fi
cacheDir="$root/.cache/kube/$version"
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet)

as_root() {
	if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

ensure_etcd() {
	if command -v etcd >/dev/null 2>&1; then return; fi
	log "etcd not found; installing Debian's etcd-server"
	as_root apt-get update -qq >&2
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >&2
	# The package starts a system etcd on the default ports; tests run their own
	# etcd on free ports, so the system one is only noise.
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
		as_root systemctl disable --now etcd >&2 || true
	fi
	command -v etcd >/dev/null || { log "etcd still missing after install"; exit 1; }
}

# cached reports whether every binary exists, the stamp names this version and
# kube-apiserver itself says it is this version (catches a half-written cache
# or an ldflags change).
cached() {
	[[ ${PIER_KUBE_REBUILD:-} == 1 ]] && return 1
	[[ -f $cacheDir/VERSION && $(cat "$cacheDir/VERSION") == "$version" ]] || return 1
	local b
	for b in "${binaries[@]}"; do [[ -x $cacheDir/$b ]] || return 1; done
	[[ $("$cacheDir/kube-apiserver" --version 2>/dev/null) == "Kubernetes $version" ]]
}

build() {
	local minor=${version#v1.}
	minor=${minor%%.*}
	local pkg=k8s.io/component-base/version
	local ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$version"
	local tmp="$cacheDir.tmp.$$"
	# A build killed half-way leaves its temp folder behind; we hold the lock.
	rm -rf "$cacheDir".tmp.* && mkdir -p "$tmp"
	log "building ${binaries[*]} $version (slow the first time: several minutes per core)"
	local start=$SECONDS
	local pkgs=()
	local b
	for b in "${binaries[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	# hack/kube's go.mod and go.sum are the pin: -mod=readonly refuses to
	# change them, GOWORK=off keeps a developer's go.work out of it.
	(cd "$modDir" && CGO_ENABLED=0 GOWORK=off go build -p "${PIER_KUBE_BUILD_P:-2}" -trimpath \
		-mod=readonly -buildvcs=false -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
	echo "$version" >"$tmp/VERSION"
	rm -rf "$cacheDir" && mv "$tmp" "$cacheDir"
	log "built in $((SECONDS - start))s into $cacheDir"
}

mkdir -p "$root/.cache/kube"
# Several test binaries may call this at once (go test ./... runs packages in
# parallel); one builds, the others wait and then find the cache warm.
exec 9>"$root/.cache/kube/.lock"
flock 9
ensure_etcd
if cached; then
	log "cached $version in $cacheDir"
else
	build
fi
# Older versions are left for the owner to delete; say so rather than guess.
for d in "$root/.cache/kube"/v*; do
	if [[ -d $d && $d != "$cacheDir" ]]; then log "stale cache (safe to delete): $d"; fi
done
echo "$cacheDir/kube-apiserver"
