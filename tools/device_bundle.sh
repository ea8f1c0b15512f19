#!/usr/bin/env bash
# Packs what a GPU machine without densefeed's packages needs to run it (the
# device tool's H200s: CUDA, torch and Triton, but no yaml-cpp, fmt, SQLite,
# Boost or bubblewrap), from an existing CUDA build of this repository:
#   tools/device_bundle.sh BUILD BUNDLE
#   BUNDLE/bin      densefeed, densefeed-gpu-ceilings, bwrap (cmake --install + /usr/bin/bwrap)
#   BUNDLE/share    schemas, the Python harness helpers, skills (cmake --install)
#   BUNDLE/harness  the bundled kernels' harnesses, drivers and kernel libraries (stripped)
#   BUNDLE/lib      every shared library these link that is not glibc's or CUDA's
# On the GPU machine: PATH=BUNDLE/bin:$PATH LD_LIBRARY_PATH=BUNDLE/lib, and
# the project's harness_path (build/bin) a link to BUNDLE/harness.
set -euo pipefail
build=$(realpath "${1:?build folder}"); bundle=${2:?bundle folder}
rm -rf "$bundle"; mkdir -p "$bundle/harness" "$bundle/lib"
bundle=$(realpath "$bundle")
cmake --install "$build" --prefix "$bundle" > /dev/null
cp /usr/bin/bwrap "$bundle/bin/"
for f in "$build"/bin/*; do
  case $(basename "$f") in *_test|*_tests|*perftest|ledger_writer|report_ledger_writer|densefeed|densefeed-gpu-ceilings) continue ;; esac
  [ -f "$f" ] && [ -x "$f" -o "${f%.so}" != "$f" ] && cp "$f" "$bundle/harness/"
done
strip --strip-unneeded "$bundle"/harness/* "$bundle"/bin/densefeed 2> /dev/null || true
for f in "$bundle"/bin/* "$bundle"/harness/*; do
  ldd "$f" 2> /dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libcu[A-Za-z]*|libnv[A-Za-z]*|libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so' | while read -r lib; do
  cp -L "$lib" "$bundle/lib/"
done
du -sh "$bundle"
