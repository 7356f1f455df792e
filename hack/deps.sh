#!/usr/bin/env bash
# Installs what pier's demo and tests need on a Debian machine: HAProxy (the
# data plane), keepalived (VRRP for the pair), curl, Chromium (test/web
# drives the web view in it), containerd, runc and the CNI plugins (the
# cluster suite's kubelets), mmdebstrap (the images), and Go modules. Safe to run again: it installs
# only what is missing. Uses sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v keepalived >/dev/null 2>&1 || need+=(keepalived) # VRRP: the active/standby pair
command -v nft >/dev/null 2>&1 || need+=(nftables)      # the pair tests make a split brain with it
command -v bird >/dev/null 2>&1 || need+=(bird2)           # BGP: the gateway router of the BGP tests
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The cluster suite (test/cluster): real kubelets need a container runtime,
# its runc shim, the CNI plugins and nsenter; hack/image.sh builds the
# images' Debian root with mmdebstrap.
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)

if ((${#need[@]})); then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "deps: need root or sudo to install ${need[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  echo "deps: installing ${need[*]} from Debian" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

command -v go >/dev/null 2>&1 || { echo "deps: Go is required (https://go.dev/doc/install); /usr/local/go/bin must be on PATH" >&2; exit 1; }
haproxy -v 2>&1 | sed -n 1p >&2 # sed reads all input: head would SIGPIPE haproxy under pipefail
go mod download
