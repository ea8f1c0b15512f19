#!/usr/bin/env bash
# InstallPrefix: `cmake --install BUILD --prefix P` installs densefeed, its
# data, its guides (share/doc/densefeed), man page and shell completions, and
# the Python harness modules where PYTHON finds them for P, and nothing else; the installed binary
# runs from an unrelated folder, and neither it nor its data names the source
# tree (data is found next to the executable, orchestrator/common/install_paths.h).
#   install_prefix_test.sh BUILD_DIR SOURCE_DIR VERSION PYTHON
# PYTHON: the harnesses' interpreter (Debian's python3).
set -euo pipefail
build=$1 src=$2 version=$3 python=$4
fail() { echo "InstallPrefix: $*" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }

# Exactly these top-level entries, and no harness binaries of the bundled examples.
[ "$(cd "$prefix" && ls | tr '\n' ' ')" = "bin lib share " ] || fail "unexpected top level: $(ls "$prefix")"
# densefeed, and densefeed-gpu-ceilings (what `machine calibrate` runs on a GPU) when built with CUDA.
bins="$(ls "$prefix/bin" | tr '\n' ' ')"
[ "$bins" = "densefeed " ] || [ "$bins" = "densefeed densefeed-gpu-ceilings " ] || fail "bin/ holds more than densefeed (and densefeed-gpu-ceilings): $bins"
for f in bin/densefeed share/densefeed/schemas/gate.schema.json share/densefeed/schemas/experiment.schema.json \
         share/densefeed/schemas/ledger.md share/densefeed/skills/densefeed-optimization-loop/SKILL.md \
         share/densefeed/skills/densefeed-optimization-loop/reference/gate-cheats.md \
         share/densefeed/python/densefeed_harness.py \
         share/doc/densefeed/README.md share/doc/densefeed/gate-authoring.md share/doc/densefeed/SERVICE.md \
         share/doc/densefeed/copyright share/man/man1/densefeed.1 share/bash-completion/completions/densefeed \
         share/zsh/site-functions/_densefeed share/fish/vendor_completions.d/densefeed.fish; do
  [ -f "$prefix/$f" ] || fail "not installed: $f"
done
cmp -s "$src/experiments/README.md" "$prefix/share/doc/densefeed/gate-authoring.md" ||
  fail "share/doc/densefeed/gate-authoring.md differs from experiments/README.md"
# The modules where this python3 looks for the prefix (packaging/python_site_dir.py): P/lib/python3.X/site-packages here.
site_rel=$("$python" "$src/packaging/python_site_dir.py" "$prefix") || fail "python_site_dir.py failed for $prefix"
[[ "$site_rel" =~ ^lib/python3\.[0-9]+/site-packages$ ]] || fail "the site of a plain prefix is $site_rel"
# For /usr (the .deb) and /usr/local (sudo cmake --install build) the answer is a folder on this python3's own sys.path.
for p in /usr /usr/local; do
  rel=$("$python" "$src/packaging/python_site_dir.py" "$p") || fail "python_site_dir.py failed for $p"
  "$python" -c "import sys; sys.exit(0 if '$p/$rel' in sys.path else 1)" || fail "$p/$rel (for the prefix $p) is not on $python's sys.path"
done
for m in densefeed_harness densefeed_driver; do
  cmp -s "$src/kernels/python/$m.py" "$prefix/$site_rel/$m.py" || fail "$site_rel/$m.py differs from kernels/python/$m.py or is missing"
done
[ -x "$prefix/bin/densefeed" ] || fail "bin/densefeed is not executable"
for f in "$src"/schemas/*; do
  cmp -s "$f" "$prefix/share/densefeed/schemas/$(basename "$f")" || fail "schemas/$(basename "$f") differs or is missing"
done
# The build folder mirrors the install layout: the same files under share/.
diff <(cd "$build/share" && find . -type f | sort) <(cd "$prefix/share" && find . -type f | sort) >"$tmp/layout.diff" ||
  { cat "$tmp/layout.diff" >&2; fail "BUILD/share and PREFIX/share differ (< build, > install)"; }

# Run from an unrelated folder, with nothing of the build on PATH.
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
out=$(env -u DENSEFEED_ROOT PATH=/usr/bin:/bin "$prefix/bin/densefeed" --version) || fail "--version exited $?"
commit=unknown
if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$src" && pwd -P)" ]; then
  commit=$(git -C "$src" rev-parse HEAD)
fi
[[ "$out" =~ ^densefeed\ ${version//./\\.}\ \(commit\ ${commit}(-dirty)?\)$ ]] ||
  fail "--version printed '$out', expected 'densefeed $version (commit $commit[-dirty])' (is the build older than HEAD?)"
help=$(env -u DENSEFEED_ROOT PATH=/usr/bin:/bin "$prefix/bin/densefeed" gate verify --help) || fail "gate verify --help exited $?"
grep -q "gates.lock" <<<"$help" || fail "gate verify --help does not describe the verb: $help"
# A harness finds the module through PYTHONPATH=share/densefeed/python (found,
# not imported: importing needs numpy, which the harness's interpreter has).
origin=$(PYTHONPATH="$prefix/share/densefeed/python" "$python" -c \
  "import importlib.util; print(importlib.util.find_spec('densefeed_harness').origin)") ||
  fail "$python does not find densefeed_harness on PYTHONPATH=share/densefeed/python"
[ "$origin" = "$prefix/share/densefeed/python/densefeed_harness.py" ] || fail "densefeed_harness found at $origin"
# Imported from that prefix's site, outside densefeed, without share/densefeed/python.
origin=$(env -u PYTHONPATH PYTHONPATH="$prefix/$site_rel" "$python" -c \
  "import densefeed_harness, densefeed_driver; print(densefeed_driver.__file__)") ||
  fail "$python cannot import densefeed_harness and densefeed_driver from $prefix/$site_rel"
[ "$origin" = "$prefix/$site_rel/densefeed_driver.py" ] || fail "densefeed_driver imported from $origin"

# No file installed names the source tree (the build folder, usually inside it, included).
if grep -rlF "$src" "$prefix/share" "$prefix/lib" >"$tmp/data.hits"; then
  fail "installed data names the source dir $src: $(tr '\n' ' ' <"$tmp/data.hits")"
fi
strings -a "$prefix/bin/densefeed" | grep -F "$src" >"$tmp/binary.hits" || true
if [ -s "$tmp/binary.hits" ]; then
  fail "the installed binary names the source dir: $(head -5 "$tmp/binary.hits" | tr '\n' ' ')"
fi
echo "InstallPrefix: ok: $(cd "$prefix" && find . -type f | wc -l) files under $prefix; $out"
