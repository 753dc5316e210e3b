#!/bin/sh
# Build pgrig's native parts into DIR (default .venv/bin, where pgrig looks for
# them beside its Python): pgrig-latencyfs, the cloud-disk latency layer
# (native/pgrig-latencyfs; docs/storage-lab.md). Needs gcc, pkg-config and
# libfuse3-dev (scripts/install-deps.sh). Without them it says so and exits 0:
# pgrig then falls back to the Python layer and names this script as the fix.
set -eu
cd "$(dirname "$0")/.."
dest=${1:-.venv/bin}
src=native/pgrig-latencyfs/pgrig-latencyfs.c
out=$dest/pgrig-latencyfs
if ! command -v gcc >/dev/null 2>&1 || ! pkg-config --exists fuse3 2>/dev/null; then
    echo "build-native: gcc or libfuse3-dev (pkg-config fuse3) missing; not building $out" >&2
    exit 0
fi
if [ -x "$out" ] && [ "$out" -nt "$src" ]; then
    exit 0
fi
mkdir -p "$dest"
# shellcheck disable=SC2046 # pkg-config's flags are words
gcc -O2 -g -Wall -Wextra -o "$out.tmp" "$src" $(pkg-config --cflags --libs fuse3) -lpthread
mv "$out.tmp" "$out"
echo "build-native: built $out"
