#include "data/gzip_file.h"

#include <unistd.h>
#include <zlib.h>

#include <stdexcept>

#include "data/missing_data.h"

namespace repro {

std::string read_gzip_file(const std::string& path, const std::string& what, const std::string& package) {
  if (access(path.c_str(), R_OK) != 0) throw MissingData(what, path, package);
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw MissingData(what, path, package);
  std::string bytes;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof buffer)) > 0) bytes.append(buffer, static_cast<size_t>(n));
  const bool failed = n < 0;
  gzclose(file);
  if (failed) throw std::runtime_error(path + ": gzip data is corrupt");
  return bytes;
}

}  // namespace repro
