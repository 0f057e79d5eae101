// The error a data loader throws when a data set is not installed: it names the Debian package that
// provides it, so the fix is one apt-get away.
#ifndef RMSNORM_REPRO_DATA_MISSING_DATA_H_
#define RMSNORM_REPRO_DATA_MISSING_DATA_H_

#include <stdexcept>
#include <string>

namespace repro {

class MissingData : public std::runtime_error {
 public:
  // what: the data set ("Fashion-MNIST"); path: the file that is missing; package: the Debian package.
  MissingData(const std::string& what, const std::string& path, const std::string& package)
      : std::runtime_error(what + " not found: " + path + " is missing or unreadable. Install the Debian package " +
                           package + " (sudo apt-get install " + package + ")."),
        package_(package) {}
  const std::string& package() const { return package_; }

 private:
  std::string package_;
};

}  // namespace repro

#endif  // RMSNORM_REPRO_DATA_MISSING_DATA_H_
