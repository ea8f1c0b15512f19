#!/usr/bin/env bash
# NewcomerInstall.AnInstallIntoDotLocalIsImportedFromTheUserSite: the
# README's `cmake --install build --prefix ~/.local` puts densefeed_harness
# and densefeed_driver in the user site of PYTHON, so that `python3 -c
# 'import densefeed_harness'` works from any folder with no PYTHONPATH (HOME
# is a temporary folder here), and the installed densefeed finds its data.
#   user_site_test.sh BUILD_DIR PYTHON
set -euo pipefail
build=$1 python=$2
fail() { echo "NewcomerInstall.AnInstallIntoDotLocalIsImportedFromTheUserSite: $*" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp/home
unset PYTHONPATH PYTHONUSERBASE
mkdir -p "$HOME" "$tmp/elsewhere"
cmake --install "$build" --prefix "$HOME/.local" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
cd "$tmp/elsewhere"
user_site=$("$python" -c 'import site; print(site.getusersitepackages())')
[[ "$user_site" == "$HOME/.local/"* ]] || fail "the user site $user_site is not under HOME/.local"
[ -f "$user_site/densefeed_harness.py" ] || fail "densefeed_harness.py is not in the user site $user_site: $(find "$HOME/.local/lib" -name '*.py')"
where=$("$python" -c 'import densefeed_harness, densefeed_driver; print(densefeed_harness.__file__)') ||
  fail "$python -c 'import densefeed_harness, densefeed_driver' failed outside densefeed"
[ "$where" = "$user_site/densefeed_harness.py" ] || fail "densefeed_harness imported from $where, not the user site"
# The same with PYTHONUSERBASE naming the base instead of HOME.
export PYTHONUSERBASE=$HOME/.local HOME=$tmp/other
"$python" -c 'import densefeed_harness' || fail "not importable with PYTHONUSERBASE=$PYTHONUSERBASE"
out=$(env -u DENSEFEED_ROOT PATH=/usr/bin:/bin "$PYTHONUSERBASE/bin/densefeed" help) || fail "densefeed help exited $?"
grep -q '^EXAMPLES:' <<<"$out" || fail "densefeed help printed no EXAMPLES"
echo "NewcomerInstall: ok: $user_site"
