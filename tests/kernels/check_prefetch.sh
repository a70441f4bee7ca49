#!/usr/bin/env bash
# check_prefetch.sh OBJECT...: the kernel objects that stream weights from
# memory (the list below) must hold prefetch instructions; GCC once deleted
# all of int4 AVX2's without a word (PrefetchAt in
# daemon/engine/kernels/avx2_common.h says how). Fails naming each such
# object with none, or missing from OBJECT... (medq_kernels' objects);
# exits 77 (skipped) where objdump is not installed.
set -euo pipefail
if ! command -v objdump >/dev/null; then
  echo "objdump not found: skipped"
  exit 77
fi
streaming=(dense_kernels_avx2 dense_kernels_rows_avx2 dense_kernels_rows_avx512 packed_avx2
           int8_avx2 int8_avxvnni int8_avx512 int4_avx2 int4_avxvnni int4_avx512)
status=0
for name in "${streaming[@]}"; do
  object=""
  for o in "$@"; do
    if [[ "$(basename "$o")" == "$name.cc.o" ]]; then object=$o; fi
  done
  if [[ -z $object ]]; then
    echo "FAIL $name: no $name.cc.o among the objects given"
    status=1
    continue
  fi
  # The mnemonic, not any symbol that merely says "prefetch".
  count=$(objdump -d "$object" | grep -cE $'\tprefetch(t[012]|nta|w)? ' || true)
  if ((count == 0)); then
    echo "FAIL $name: no prefetch instruction in $name.cc.o"
    status=1
  else
    echo "ok $name: $count prefetch instructions"
  fi
done
exit "$status"
