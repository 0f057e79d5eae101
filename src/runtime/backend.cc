#include "runtime/backend.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace rmsnorm::runtime {
namespace {

std::atomic<int>& Backend() {
  static std::atomic<int> backend{[] {
    const char* env = std::getenv("RMSNORM_BACKEND");
    return env && std::strcmp(env, "reference") == 0 ? RMSNORM_BACKEND_REFERENCE : RMSNORM_BACKEND_AUTO;
  }()};
  return backend;
}

}  // namespace

rmsnorm_backend GetBackend() { return static_cast<rmsnorm_backend>(Backend().load(std::memory_order_relaxed)); }
void SetBackend(rmsnorm_backend backend) { Backend().store(backend); }

}  // namespace rmsnorm::runtime
