#!/usr/bin/env bash
# NewcomerInstall.PipInstallsTheHarnessPackageIntoAFreshVenv: the
# densefeed-harness package (kernels/python/pyproject.toml, setuptools) has
# densefeed's version, builds and installs with pip into a fresh venv, and
# its two modules import there from a folder outside the repository. Offline:
# the venv sees Debian's numpy, setuptools and wheel (--system-site-packages)
# and pip builds with --no-build-isolation --no-index. The package is built
# from a copy, so that the source tree gets no build/ or .egg-info.
#   python_package_test.sh SOURCE_DIR VERSION PYTHON
set -euo pipefail
src=$1 version=$2 python=$3
fail() { echo "NewcomerInstall.PipInstallsTheHarnessPackageIntoAFreshVenv: $*" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -qx "version = \"$version\"" "$src/kernels/python/pyproject.toml" ||
  fail "kernels/python/pyproject.toml's version is not densefeed's $version: $(grep '^version' "$src/kernels/python/pyproject.toml")"
mkdir "$tmp/pkg" "$tmp/elsewhere"
cp "$src/kernels/python/pyproject.toml" "$src/kernels/python/densefeed_harness.py" "$src/kernels/python/densefeed_driver.py" "$tmp/pkg/"
"$python" -m venv --system-site-packages "$tmp/venv" || fail "$python -m venv failed (Debian: python3-venv)"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
unset PYTHONPATH
"$tmp/venv/bin/python" -m pip install --no-build-isolation --no-index "$tmp/pkg" >"$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log" >&2; fail "pip install failed"; }
cd "$tmp/elsewhere"
out=$("$tmp/venv/bin/python" -c 'import densefeed_harness, densefeed_driver; print(densefeed_harness.__file__); print(densefeed_driver.__file__)') ||
  fail "the venv cannot import densefeed_harness and densefeed_driver"
while read -r f; do
  [[ "$f" == "$tmp/venv/"*"/site-packages/"* ]] || fail "imported from $f, not the venv's site-packages"
done <<<"$out"
shown=$("$tmp/venv/bin/python" -m pip show densefeed-harness | sed -n 's/^Version: //p')
[ "$shown" = "$version" ] || fail "pip show densefeed-harness: version '$shown', not $version"
# Only the two modules: not the softmax example beside them.
"$tmp/venv/bin/python" -c 'import softmax_harness' 2>/dev/null && fail "the package installed softmax_harness too"
echo "NewcomerInstall: ok: densefeed-harness $shown in $tmp/venv"
