#!/usr/bin/env bash
# InstallDeb: `cpack -G DEB` from the build folder makes densefeed's .deb: the
# binary, schemas, skill and Python harness modules under /usr, the guides in
# /usr/share/doc/densefeed, the man page and the bash, zsh and fish
# completions; Depends on the programs and data its verbs use (bubblewrap,
# git, tar, python3 with numpy, libjs-vega for report's charts) and on the
# libraries it links; the unpacked binary runs.
#   install_deb_test.sh BUILD_DIR VERSION
set -euo pipefail
build=$1 version=$2
fail() { echo "InstallDeb: $*" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; fail "cpack failed"; }
debs=("$tmp"/out/*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || fail "expected one .deb in $tmp/out: ${debs[*]}"
deb=${debs[0]}
[ "$(basename "$deb")" = "densefeed_${version}_$(dpkg --print-architecture).deb" ] || fail "unexpected file name $(basename "$deb")"
[ "$(dpkg-deb -f "$deb" Package)" = densefeed ] || fail "Package is '$(dpkg-deb -f "$deb" Package)'"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version is '$(dpkg-deb -f "$deb" Version)', not $version"
[ -n "$(dpkg-deb -f "$deb" Maintainer)" ] || fail "no Maintainer"

dpkg-deb --contents "$deb" | awk '{print $NF}' >"$tmp/contents"
for f in ./usr/bin/densefeed ./usr/share/densefeed/schemas/gate.schema.json ./usr/share/densefeed/schemas/experiment.schema.json \
         ./usr/share/densefeed/schemas/ledger.md ./usr/share/densefeed/skills/densefeed-optimization-loop/SKILL.md \
         ./usr/share/densefeed/python/densefeed_harness.py ./usr/lib/python3/dist-packages/densefeed_harness.py \
         ./usr/share/densefeed/python/densefeed_driver.py ./usr/lib/python3/dist-packages/densefeed_driver.py \
         ./usr/share/doc/densefeed/README.md ./usr/share/doc/densefeed/gate-authoring.md ./usr/share/doc/densefeed/SERVICE.md \
         ./usr/share/doc/densefeed/copyright ./usr/share/man/man1/densefeed.1 ./usr/share/bash-completion/completions/densefeed \
         ./usr/share/zsh/site-functions/_densefeed ./usr/share/fish/vendor_completions.d/densefeed.fish; do
  grep -qxF "$f" "$tmp/contents" || fail "the .deb does not contain $f"
done
grep '^\./usr/bin/.' "$tmp/contents" | grep -vqxE '\./usr/bin/(densefeed|densefeed-gpu-ceilings)' &&
  fail "usr/bin holds more than densefeed (and densefeed-gpu-ceilings): $(grep '^\./usr/bin/' "$tmp/contents" | tr '\n' ' ')"

depends=$(dpkg-deb -f "$deb" Depends)
tr ',' '\n' <<<"$depends" | awk '{print $1}' >"$tmp/depends"
for p in bubblewrap git tar python3 python3-numpy libjs-vega libyaml-cpp0.7 libfmt9 libsqlite3-0 libssl3 zlib1g \
         libboost-filesystem1.74.0 libstdc++6; do
  grep -qxF "$p" "$tmp/depends" || fail "Depends lacks $p: $depends"
done

[ "$(dpkg-deb -f "$deb" Suggests)" = "slurm-client" ] || fail "Suggests is '$(dpkg-deb -f "$deb" Suggests)', not slurm-client"
# Nothing staged outside /usr (the package is made with DESTDIR and the prefix /usr).
grep -v '^\./usr\(/\|$\)' "$tmp/contents" | grep -vqx '\./' && fail "files outside /usr: $(grep -v '^\./usr' "$tmp/contents" | tr '\n' ' ')"

dpkg-deb -x "$deb" "$tmp/root"
out=$(cd "$tmp" && env -u DENSEFEED_ROOT "$tmp/root/usr/bin/densefeed" --version) || fail "the packaged densefeed --version exited $?"
[[ "$out" == "densefeed $version (commit "* ]] || fail "the packaged densefeed --version printed '$out'"
echo "InstallDeb: ok: $(basename "$deb") $(stat -c %s "$deb") bytes; Depends: $depends"
