#!/usr/bin/env bash
# Installs every fla-core version the fla-intracard-cp gate uses, each into
# its own folder .fla-sites/VERSION beside this script:
#
#   pip install --require-hashes --no-deps --target .fla-sites/VERSION -r requirements/fla-core-VERSION.txt
#
# The harnesses put .fla-sites/VERSION first on sys.path for the version they
# run (harness/kda_case.py, fla_site), so versions never meet in one process
# and nothing is installed into the interpreter's own site-packages.
# torch and triton come from the interpreter (fla-core needs torch >= 2.7,
# triton >= 3.3 and a CUDA GPU); fla-core's other need, einops, is pinned with
# it. The gate freezes this file and the reference's requirements file.
#
#   ./setup.sh                    # from PyPI
#   ./setup.sh --wheels DIR       # offline, from wheels in DIR (pip download --no-deps ... -d DIR)
#   PYTHON=/path/to/python3 ./setup.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
wheels=
if [ "${1:-}" = "--wheels" ]; then
  wheels=$(cd "${2:?--wheels needs a folder}" && pwd)
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--wheels DIR]" >&2; exit 2
fi
for version in 0.5.2 0.6.0; do
  target="$here/.fla-sites/$version"
  rm -rf "$target"
  src=(--index-url https://pypi.org/simple)
  [ -n "$wheels" ] && src=(--no-index --find-links "$wheels")
  "$py" -m pip install --quiet --disable-pip-version-check --no-compile --no-cache-dir \
      --require-hashes --no-deps "${src[@]}" --target "$target" -r "$here/requirements/fla-core-$version.txt"
  got=$(PYTHONPATH="$target" "$py" -c 'import importlib.metadata as m; print(m.version("fla-core"))')
  [ "$got" = "$version" ] || { echo "setup.sh: $target holds fla-core $got, not $version" >&2; exit 1; }
  echo "fla-core $version -> $target"
done
"$py" - <<'PY'
import torch, triton
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (the gate needs a CUDA GPU)"
print(f"torch {torch.__version__}, triton {triton.__version__}, GPU: {gpu}")
PY
