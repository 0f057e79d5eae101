// Failures inside the library travel as exceptions to the C ABI, which turns them into a status and
// this thread's last-error message. Nothing throws across the ABI.
#ifndef RMSNORM_SRC_RUNTIME_ERROR_H_
#define RMSNORM_SRC_RUNTIME_ERROR_H_

#include <stdexcept>
#include <string>

#include "rmsnorm/rmsnorm.h"

namespace rmsnorm::runtime {

class Failure : public std::runtime_error {
 public:
  Failure(rmsnorm_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  rmsnorm_status status() const { return status_; }

 private:
  rmsnorm_status status_;
};

[[noreturn]] inline void FailInvalid(const std::string& message) {
  throw Failure(RMSNORM_ERROR_INVALID_ARGUMENT, message);
}
[[noreturn]] inline void FailUnsupported(const std::string& message) {
  throw Failure(RMSNORM_ERROR_UNSUPPORTED, message);
}

void SetLastError(const std::string& message);
const char* LastError();

}  // namespace rmsnorm::runtime

#endif  // RMSNORM_SRC_RUNTIME_ERROR_H_
