#!/usr/bin/env bash
# Builds (once) the Helm command that the chart tests (test/helm) and
# hack/gen-deploy.sh run, from the helm.sh/helm/v3 version pinned in
# hack/helm/go.mod. No Helm release is downloaded: the Go module proxy is
# the only source, and hack/helm/go.sum pins every module.
#
# The binary is cached in .cache/helm/<version>/helm (this script owns that
# folder); a repeat run only checks the stamp and the binary's reported
# version. Progress goes to stderr; the LAST line on stdout is the absolute
# path of the helm binary, so callers can do: helm=$(hack/helm.sh | tail -n1).
#
# Environment:
#   PIER_HELM_BUILD_P   parallelism for go build (default 2; the machine is shared)
#   PIER_HELM_REBUILD=1 rebuild even if the cache looks good
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
modDir="$root/hack/helm"
log() { printf 'helm.sh: %s\n' "$*" >&2; }
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"

# The version is read from go.mod so there is exactly one place to bump it.
version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" { print $3 }' "$modDir/go.mod")
if [[ ! $version =~ ^v3\.[0-9]+\.[0-9]+$ ]]; then
	log "cannot read the pinned helm.sh/helm/v3 version from $modDir/go.mod"
	exit 1
fi
cacheDir="$root/.cache/helm/$version"

# cached reports whether the binary exists, the stamp names this version and
# helm itself says it is this version (catches a half-written cache or an
# ldflags change).
cached() {
	[[ ${PIER_HELM_REBUILD:-} == 1 ]] && return 1
	[[ -f $cacheDir/VERSION && $(cat "$cacheDir/VERSION") == "$version" ]] || return 1
	[[ -x $cacheDir/helm ]] || return 1
	[[ $("$cacheDir/helm" version --template '{{.Version}}' 2>/dev/null) == "$version" ]]
}

build() {
	# helm's Makefile stamps its version and the Kubernetes version it
	# assumes without a cluster (helm template, helm lint) from client-go's
	# minor: client-go v0.N.x is Kubernetes v1.N.
	local clientGo minor
	clientGo=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$modDir/go.mod")
	minor=$(echo "$clientGo" | cut -d. -f2)
	if [[ ! $minor =~ ^[0-9]+$ ]]; then
		log "cannot read k8s.io/client-go's version from $modDir/go.mod"
		exit 1
	fi
	local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
	ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
	local p
	for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
		ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$minor"
	done
	local tmp="$cacheDir.tmp.$$"
	# A build killed half-way leaves its temp folder behind; we hold the lock.
	rm -rf "$cacheDir".tmp.* && mkdir -p "$tmp"
	log "building helm $version (about a few minutes the first time)"
	local start=$SECONDS
	# hack/helm's go.mod and go.sum are the pin: -mod=readonly refuses to
	# change them, GOWORK=off keeps a developer's go.work out of it.
	(cd "$modDir" && CGO_ENABLED=0 GOWORK=off go build -p "${PIER_HELM_BUILD_P:-2}" -trimpath \
		-mod=readonly -buildvcs=false -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm)
	echo "$version" >"$tmp/VERSION"
	rm -rf "$cacheDir" && mv "$tmp" "$cacheDir"
	log "built in $((SECONDS - start))s into $cacheDir"
}

mkdir -p "$root/.cache/helm"
# Several test binaries may call this at once; one builds, the others wait
# and then find the cache warm.
exec 9>"$root/.cache/helm/.lock"
flock 9
if cached; then
	log "cached $version in $cacheDir"
else
	build
fi
# Older versions are left for the owner to delete; say so rather than guess.
for d in "$root/.cache/helm"/v*; do
	if [[ -d $d && $d != "$cacheDir" ]]; then log "stale cache (safe to delete): $d"; fi
done
echo "$cacheDir/helm"
