#!/usr/bin/env bash
# Packs what building densefeed needs beyond a compiler and CMake (headers,
# shared libraries and CMake package files of yaml-cpp, nlohmann-json, CLI11,
# fmt, SQLite, OpenSSL, Boost, zlib, muparser and valijson) from this
# machine's Debian packages into one tarball, for a machine that has a
# compiler, CMake and ninja but none of these: the device tool's GPU machines
# (device_bench_verdict.sh builds densefeed there from the working tree).
#
#   experiments/fla-intracard-cp/pack_build_deps.sh [TARBALL]
#
# TARBALL defaults to .dfdeps/deps.tar.gz beside this script (git-ignored;
# carry experiments/fla-intracard-cp/.dfdeps). Inside it the packages' files
# keep their paths under usr/ (/lib/... is taken as /usr/lib/...), so their
# CMake files, which locate everything relative to themselves, work from
# wherever it is unpacked: cmake -DCMAKE_PREFIX_PATH=DIR/usr. Static
# libraries and documentation are left out; each -dev package's shared
# library comes with the runtime package that holds it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tarball=$(realpath -m "${1:-$here/.dfdeps/deps.tar.gz}")
dev=(libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libsqlite3-dev libssl-dev libboost1.74-dev
     libboost-filesystem1.74-dev zlib1g-dev libmuparser-dev libvalijson-dev)
command -v dpkg-query > /dev/null || { echo "pack_build_deps.sh: needs a Debian machine (dpkg-query)" >&2; exit 2; }
for p in "${dev[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "ok installed" || { echo "pack_build_deps.sh: $p is not installed here" >&2; exit 2; }
done
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT

# The -dev packages' files, and the runtime packages their .so links lead to.
runtime=()
for p in "${dev[@]}"; do
  while read -r f; do
    [ -L "$f" ] && [[ $f == *.so ]] || continue
    real=$(readlink -f "$f")
    owner=$(dpkg-query -S "$real" 2> /dev/null || dpkg-query -S "${real#/usr}" 2> /dev/null || true)
    [ -n "$owner" ] && runtime+=("${owner%%:*}")
  done < <(dpkg-query -L "$p")
done
mapfile -t runtime < <(printf '%s\n' "${runtime[@]}" | sort -u)
{
  for p in "${dev[@]}"; do dpkg-query -L "$p"; done
  for p in "${runtime[@]}"; do dpkg-query -L "$p" | grep -E '\.so(\.[0-9]+)*$'; done
} | grep -v -E '^/usr/share/(doc|man|lintian|bug)(/|$)|\.a$' | sort -u > "$stage/files"

# Plain files and relative links go in as they are (/lib/... as usr/lib/...);
# an absolute link is made again, relative, inside the tarball.
mkdir -p "$stage/links"
: > "$stage/tar-list"
n=0
while read -r f; do
  if [ -L "$f" ] && [[ $(readlink "$f") == /* ]]; then
    rel=usr${f#/usr}; target=$(readlink "$f"); target=usr${target#/usr}
    mkdir -p "$stage/links/$(dirname "$rel")"
    ln -s "$(realpath -m --relative-to="/$(dirname "$rel")" "/$target")" "$stage/links/$rel"
  elif [ -f "$f" ] || [ -L "$f" ]; then       # folders come with their files
    echo "${f#/}" >> "$stage/tar-list"
  else
    continue
  fi
  n=$((n + 1))
done < "$stage/files"
tar -C / -cf "$stage/deps.tar" --no-recursion --transform 's,^lib/,usr/lib/,' -T "$stage/tar-list"
if [ -d "$stage/links/usr" ]; then
  (cd "$stage/links" && find usr -type l) | tar -C "$stage/links" -rf "$stage/deps.tar" --no-recursion -T -
fi
mkdir -p "$(dirname "$tarball")"
gzip -c "$stage/deps.tar" > "$tarball"
echo "pack_build_deps.sh: $n files of ${#dev[@]} -dev packages and ${#runtime[@]} runtime packages (${runtime[*]}) -> $tarball ($(du -h "$tarball" | cut -f1))"
