#!/usr/bin/env bash
# Fetches NVIDIA's PTX assembler from Debian's non-free nvidia-cuda-toolkit
# package (no GPU or driver needed) into .cache/ and prints the path of
# ptxas. Only the named binaries are extracted; nothing is installed. Exits
# non-zero, printing why, if it cannot.
#
#   scripts/fetch-ptxas.sh        # ptxas 11.8 (bookworm): sm_80, sm_90
#   scripts/fetch-ptxas.sh 11.8   # the same
#   scripts/fetch-ptxas.sh 12.4   # ptxas, nvdisasm and cuobjdump 12.4
#                                 # (trixie): sm_90a too, and SASS listings
#
# CI (.ci/run) fetches both: emit/ptx TestPtxas assembles every example
# kernel for sm_80 and sm_90 with 11.8 (ATTNGEN_PTXAS), TestPtxas12 and
# TestSASS assemble them for sm_90 and sm_90a with 12.4 and read the inner
# loop's SASS (ATTNGEN_PTXAS12; nvdisasm is looked up beside it). Each
# version is one .deb of the whole toolkit (bookworm's 11.8: 84.0 MB;
# trixie's 12.4: 87.2 MB, about 4 s to download and extract on the CI
# machine); the package version and its sha256 are pinned, so a changed
# archive fails here rather than giving another assembler.
set -euo pipefail
ver=${1:-11.8}
root=$(cd "$(dirname "$0")/.." && pwd)
case "$ver" in
11.8)
  dir="$root/.cache/ptxas"
  suite=bookworm
  pkg="nvidia-cuda-toolkit=11.8.89~11.8.0-5~deb12u1"
  sum="d1156026e704fe0368b6295db06224ed00a727966fb13454f34e3f3102db0457"
  bins=(ptxas)
  ;;
12.4)
  dir="$root/.cache/ptxas-12.4"
  suite=trixie
  pkg="nvidia-cuda-toolkit=12.4.131~12.4.1-2"
  sum="cd5fe85aee38d108b315f408a688641478f2402622a10c677478eb7a6c4e5319"
  bins=(ptxas nvdisasm cuobjdump)
  ;;
*)
  echo "fetch-ptxas.sh: unknown version '$ver' (want 11.8 or 12.4)" >&2
  exit 2
  ;;
esac
bin="$dir/usr/bin/ptxas"
have=1
for b in "${bins[@]}"; do [ -x "$dir/usr/bin/$b" ] || have=0; done
if [ "$have" = 1 ]; then echo "$bin"; exit 0; fi
fail() { echo "fetch-ptxas.sh $ver: $*" >&2; exit 1; }
for t in apt-get dpkg-deb sha256sum tar; do
  command -v "$t" >/dev/null || fail "needs $t (a Debian or Ubuntu machine)"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts/lists/partial" "$tmp/cache/archives/partial" "$tmp/src"
cat > "$tmp/src/nonfree.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
o="-oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts=$tmp/src -oDir::State::Lists=$tmp/parts/lists -oDir::Cache=$tmp/cache -oAPT::Sandbox::User=root"
apt-get $o -qq update >&2 || fail "apt-get update of Debian $suite non-free failed (network, or a keyring without $suite's keys)"
(cd "$tmp" && apt-get $o -qq download "$pkg" >&2) || fail "cannot download $pkg from Debian $suite non-free (the pinned version may have left the archive: pin the new one and its sha256 here)"
deb=$(ls "$tmp"/nvidia-cuda-toolkit_*.deb)
echo "$sum  $deb" | sha256sum -c --quiet - >&2 || fail "$(basename "$deb"): sha256 differs from the pinned $sum"
mkdir -p "$dir"
members=()
for b in "${bins[@]}"; do members+=("./usr/bin/$b"); done
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir" "${members[@]}" || fail "extracting ${bins[*]} from $(basename "$deb") failed"
"$bin" --version >&2 || fail "$bin does not run on this machine"
echo "$bin"
