#include "data/fashion_mnist.h"

#include <cmath>
#include <stdexcept>

#include "data/gzip_file.h"

namespace repro {
namespace {

uint32_t big_endian_u32(const std::string& b, size_t at) {
  auto byte = [&](size_t i) { return uint32_t{static_cast<uint8_t>(b[i])}; };
  return (byte(at) << 24) | (byte(at + 1) << 16) | (byte(at + 2) << 8) | byte(at + 3);
}

// IDX: a magic number 0x0000TTDD (type TT = 0x08 unsigned byte, DD dimensions), DD big-endian sizes, data.
std::vector<uint8_t> read_idx(const std::string& path, uint32_t dims, std::vector<uint32_t>* shape) {
  const std::string b = read_gzip_file(path, "Fashion-MNIST", kFashionMnistPackage);
  const size_t header = 4 + 4 * size_t{dims};
  if (b.size() < header || big_endian_u32(b, 0) != (0x0800u | dims))
    throw std::runtime_error(path + ": not an IDX file of unsigned bytes with " + std::to_string(dims) + " dimensions");
  size_t count = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    shape->push_back(big_endian_u32(b, 4 + 4 * d));
    count *= shape->back();
  }
  if (b.size() != header + count) throw std::runtime_error(path + ": size does not match its IDX header");
  return std::vector<uint8_t>(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
}

ImageSet read_split(const std::string& dir, const std::string& prefix) {
  std::vector<uint32_t> image_shape, label_shape;
  const std::vector<uint8_t> pixels = read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", 3, &image_shape);
  const std::vector<uint8_t> labels = read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 1, &label_shape);
  if (image_shape[0] != label_shape[0]) throw std::runtime_error(prefix + ": image and label counts differ");
  ImageSet set;
  set.count = image_shape[0];
  set.pixels = int64_t{image_shape[1]} * image_shape[2];
  set.images.resize(pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i) set.images[i] = pixels[i] / 255.0f;
  set.labels.resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= FashionMnist::kClasses) throw std::runtime_error(prefix + ": label out of range");
    set.labels[i] = labels[i];
  }
  return set;
}

}  // namespace

FashionMnist load_fashion_mnist(const std::string& dir) {
  FashionMnist data;
  data.train = read_split(dir, "train");
  data.test = read_split(dir, "t10k");
  // Standardize with the training set's pixel mean and deviation (about 0.286 and 0.353).
  double sum = 0.0, sum_squares = 0.0;
  for (float v : data.train.images) {
    sum += v;
    sum_squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(data.train.images.size());
  const double mean = sum / n;
  const double stddev = std::sqrt(sum_squares / n - mean * mean);
  for (ImageSet* set : {&data.train, &data.test})
    for (float& v : set->images) v = static_cast<float>((v - mean) / stddev);
  return data;
}

}  // namespace repro
