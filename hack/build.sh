#!/usr/bin/env bash
# Builds bin/pier. Go's own build cache makes repeat builds take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -trimpath -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/pier ./cmd/pier
echo "built bin/pier" >&2
