// What the kernels need to know about the memory hierarchy, and the CPU vendor that decides, with
// the L1d's size, where their prefetches should put lines (RowPlan::prefetch_into_l1).
#ifndef RMSNORM_SRC_RUNTIME_CACHE_INFO_H_
#define RMSNORM_SRC_RUNTIME_CACHE_INFO_H_

#include <cstdint>

namespace rmsnorm::runtime {

// Calls that move at least this many bytes of (rows, cols) tensors, inputs and outputs, write their
// outputs with non-temporal stores: such outputs would leave the cache before anything read them, and
// these stores skip reading each line before overwriting it. A quarter of the last-level cache (Linux
// sysfs, else sysconf, else 32 MiB): glibc's memcpy streams copies of that size by default, and
// counting every tensor of the call streams a little earlier than it would. The rest of the cache
// holds the rest of the program, and a virtual machine's reported cache is shared with other tenants.
// RMSNORM_STREAM_BYTES from the environment overrides it (0: always).
int64_t StreamingStoreBytes();

// The last-level cache's size in bytes (Linux sysfs, else sysconf, else 32 MiB), read once.
int64_t LastLevelCacheBytes();

// CPU 0's L1 data cache in bytes (Linux sysfs, else sysconf, else 32 KiB), read once.
int64_t L1DataCacheBytes();

// Whether this is an x86 CPU from AMD (CPUID's vendor string "AuthenticAMD"), read once.
bool CpuIsAmd();

// Whether the kernels' next-row prefetches bring their lines into L1 as well (prefetcht0), not into
// L2 only (prefetcht1): on AMD CPUs whose L1 data cache holds at least 48 KiB. A row of 16 KiB
// prefetched a row ahead takes 16 KiB of L1 beside the row being read and its gain: into L1 measured
// faster on the Zen 5 (48 KiB L1d), slower on the Zen 3 and the Zen 4 (32 KiB) and on an Intel Xeon
// with 48 KiB (Emerald Rapids), where the L2 prefetches ran the f32 backward from memory 1.1-1.2x as
// fast (the commits say by how much). Not measured on ARM, which keeps L2. RMSNORM_PREFETCH_INTO_L1=1
// or 0 in the environment overrides the rule, and with it the plan choices that follow it
// (RowPlan::stream_in_halves, pair_rows): the tests run both plans on one machine so. Decided once.
bool PrefetchIntoL1();

// CPU 0's caches as Linux sysfs reports them, in bytes per instance, 0 where it does not say: the L1
// data cache, L2, L3, and the highest level found. Read on every call; rmsnorm-bench reports them.
struct CacheSizes {
  int64_t l1d = 0, l2 = 0, l3 = 0;
  int64_t last_level = 0;
};
CacheSizes ReadCacheSizes();

}  // namespace rmsnorm::runtime

#endif  // RMSNORM_SRC_RUNTIME_CACHE_INFO_H_
