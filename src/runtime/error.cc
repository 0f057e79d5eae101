#include "runtime/error.h"

namespace rmsnorm::runtime {
namespace {
thread_local std::string t_last_error;
}

void SetLastError(const std::string& message) { t_last_error = message; }
const char* LastError() { return t_last_error.c_str(); }

}  // namespace rmsnorm::runtime
