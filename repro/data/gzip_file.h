// Reading a whole gzip'd file with zlib, for the data loaders whose Debian packages ship .gz files.
#ifndef RMSNORM_REPRO_DATA_GZIP_FILE_H_
#define RMSNORM_REPRO_DATA_GZIP_FILE_H_

#include <string>

namespace repro {

// The whole decompressed content of path. Throws MissingData(what, path, package) when the file is
// missing or unreadable, std::runtime_error when its gzip data is corrupt.
std::string read_gzip_file(const std::string& path, const std::string& what, const std::string& package);

}  // namespace repro

#endif  // RMSNORM_REPRO_DATA_GZIP_FILE_H_
