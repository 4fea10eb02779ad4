#!/usr/bin/env bash
# Builds the example backend as a shared library (as CMake does: C99, hidden visibility), checks
# that it exports only the ABI entry points, then builds and runs the threaded C test against it.
#
# usage: tests/run_c_tests.sh [INCLUDE_DIR]     (VALGRIND=1 runs the test under valgrind)
# INCLUDE_DIR holds horovod/hvd_backend.h; by default hvd-core's copy in this monorepo, else the
# one of an installed hvd-core (horovod.common.get_include()).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../src/hvd_backend_example/store_backend.c"
inc="${1:-$here/../../../packages/hvd-core/src/horovod/common/include}"
if [ ! -f "$inc/horovod/hvd_backend.h" ]; then
  inc="$(python3 -c 'import horovod.common as c; print(c.get_include())')"
fi
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
cflags=(-std=c99 -O2 -g -Wall -Wextra -Wpedantic -Werror -I "$inc")

gcc "${cflags[@]}" -fPIC -fvisibility=hidden -shared "$src" -o "$build/libhvd_backend_example.so"
exports="$(nm -D --defined-only "$build/libhvd_backend_example.so" | awk '{print $3}' | sort | tr '\n' ' ')"
if [ "$exports" != "hvd_backend_ext_v1_get hvd_backend_v1_get " ]; then
  echo "FAIL: the library must export only hvd_backend_v1_get and hvd_backend_ext_v1_get, it exports: $exports" >&2
  exit 1
fi
gcc "${cflags[@]}" -pthread "$here/test_store_backend.c" -o "$build/test_store_backend" \
  -L "$build" -lhvd_backend_example -Wl,-rpath,"$build" -lm

if [ "${VALGRIND:-0}" = 1 ]; then
  valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    "$build/test_store_backend"
else
  "$build/test_store_backend"
fi
