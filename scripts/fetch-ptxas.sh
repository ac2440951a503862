#!/usr/bin/env bash
# Fetches NVIDIA's PTX assembler (ptxas 11.8, from Debian bookworm's
# non-free nvidia-cuda-toolkit package; no GPU or driver needed) into
# .cache/ptxas/ and prints its path. CI uses it so that every generated PTX
# kernel is assembled for sm_80 and sm_90 and checked for register spills
# (emit/ptx TestPtxas). Only the one binary is extracted; nothing is
# installed. Exits non-zero, printing why, if it cannot.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.cache/ptxas"
bin="$dir/usr/bin/ptxas"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
pkg="nvidia-cuda-toolkit=11.8.89~11.8.0-5~deb12u1"
sum="d1156026e704fe0368b6295db06224ed00a727966fb13454f34e3f3102db0457"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts/lists/partial" "$tmp/cache/archives/partial" "$tmp/src"
cat > "$tmp/src/nonfree.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
o="-oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts=$tmp/src -oDir::State::Lists=$tmp/parts/lists -oDir::Cache=$tmp/cache -oAPT::Sandbox::User=root"
apt-get $o -qq update >&2
(cd "$tmp" && apt-get $o -qq download "$pkg" >&2)
deb=$(ls "$tmp"/nvidia-cuda-toolkit_*.deb)
echo "$sum  $deb" | sha256sum -c --quiet - >&2
mkdir -p "$dir"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir" ./usr/bin/ptxas
"$bin" --version >&2
echo "$bin"
