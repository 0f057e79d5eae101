// What the kernels need to know about the memory hierarchy.
#ifndef RMSNORM_SRC_RUNTIME_CACHE_INFO_H_
#define RMSNORM_SRC_RUNTIME_CACHE_INFO_H_

#include <cstdint>

namespace rmsnorm::runtime {

// Outputs of at least this many bytes are written with non-temporal stores: they would not stay in
// cache anyway, and such stores skip reading each line before overwriting it. The last-level cache's
// size (Linux sysfs, else sysconf, else 32 MiB), or RMSNORM_STREAM_BYTES from the environment.
int64_t StreamingStoreBytes();

}  // namespace rmsnorm::runtime

#endif  // RMSNORM_SRC_RUNTIME_CACHE_INFO_H_
