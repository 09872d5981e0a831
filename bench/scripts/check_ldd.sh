#!/usr/bin/env bash
# check_ldd.sh BINARY...: fails (exit 1) when ldd lists a shared library beyond the C runtime
# (linux-vdso, libc, libm, libdl, libpthread, librt, ld-linux). libcuda, libnvrtc and
# libnvidia-ml must be dlopen()ed, libstdc++/libgcc_s linked statically (cmake/Static.cmake).
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi
allowed='^(linux-vdso\.so|linux-gate\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux[-a-z0-9_.]*\.so)'
status=0
for bin in "$@"; do
  if [ ! -f "$bin" ]; then
    echo "check_ldd: $bin: no such file" >&2
    status=1
    continue
  fi
  out=$(ldd "$bin" 2>&1) || { echo "check_ldd: $bin: ldd failed: $out" >&2; status=1; continue; }
  if grep -q "statically linked" <<<"$out"; then continue; fi
  while read -r line; do
    [ -z "$line" ] && continue
    lib=$(awk '{print $1}' <<<"$line")
    base=$(basename "$lib")
    if ! grep -Eq "$allowed" <<<"$base"; then
      echo "check_ldd: $bin: needs $base ($line)" >&2
      status=1
    fi
  done <<<"$out"
done
exit $status
