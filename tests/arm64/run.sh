#!/usr/bin/env bash
# The aarch64 suite's runs beyond ctest (`make test-arm64` runs ctest first, under qemu -cpu max with
# 128-bit SVE: targets SVE2_128, SVE2, SVE and NEON). Highway builds two more aarch64 targets that only
# a CPU of their vector length runs, and SVE at 256 or 512 bits emulates about ten times slower than
# at 128, so each other CPU gets the tests that compare bits across targets and the kernels' paths:
#   cortex-a72       NEON alone: the kernel sweep, Kernels, Edge, SameBits, every output streamed
#   max, 128-bit SVE SameBits and Kernels with every output streamed
#   max, 256-bit SVE SameBits and the cheap Kernels tests on SVE_256 alone, the target the library
#                    picks at 256 bits (RMSNORM_TEST_TARGETS; SVE and SVE2 run at 128 and 512), streamed
#   max, 512-bit SVE SameBits and Kernels (qemu's default vector length for -cpu max)
# Two runs at a time; each log is printed whole once its run ends. Usage: tests/arm64/run.sh [BUILD_DIR]
set -uo pipefail
build=${1:-build-arm64}
tests=$build/tests/rmsnorm_tests
limit=${ARM64_RUN_TIMEOUT:-600}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# run NAME CPU ENV FILTER: one qemu run of the suite, its log in $logs/NAME.
run() {
  local name=$1 cpu=$2 env=$3 filter=$4 start=$SECONDS status=0
  timeout "$limit" qemu-aarch64 -L / -cpu "$cpu" -E RMSNORM_NUM_THREADS=1 -E OMP_NUM_THREADS=1 $env \
    "$tests" --gtest_filter="$filter" --gtest_brief=1 > "$logs/$name" 2>&1 || status=$?
  echo "$status $((SECONDS - start))" > "$logs/$name.status"
}

streamed="-E RMSNORM_STREAM_BYTES=0"
cheap_kernels="Kernels.*:-Kernels.EachRowAsIfAlone"
runs=(neon sve128 sve256 sve512)
declare -A cpu=([neon]=cortex-a72 [sve128]=max,sve-default-vector-length=16
                [sve256]=max,sve-default-vector-length=32 [sve512]=max)
# Two chains of about the same length.
{
  run sve256 "${cpu[sve256]}" "$streamed -E RMSNORM_TEST_TARGETS=SVE_256" "SameBits.*:CpuTarget.*:$cheap_kernels"
  run sve128 "${cpu[sve128]}" "$streamed" "SameBits.*:Kernels.*:CpuTarget.*"
} &
{
  run sve512 "${cpu[sve512]}" "" "SameBits.*:Kernels.*:CpuTarget.*"
  run neon "${cpu[neon]}" "$streamed" \
    "EveryTarget/*:Kernels.*:Edge.*:SameBits.*:CpuTarget.*:-Edge.BitwiseIdenticalForAnyThreadCount:Edge.VeryLongRows"
} &
wait

failed=()
for name in "${runs[@]}"; do
  read -r status seconds < "$logs/$name.status"
  echo "== qemu -cpu ${cpu[$name]} ($name): exit $status, ${seconds}s"
  grep -v '^Running main() from' "$logs/$name"
  [ "$status" -eq 0 ] || failed+=("$name")
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "== aarch64 runs failed: ${failed[*]}"
  exit 1
fi
echo "== aarch64 runs passed: ${runs[*]}"
