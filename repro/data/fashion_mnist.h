// Fashion-MNIST (Xiao, Rasul & Vollgraf 2017) from the Debian package dataset-fashion-mnist: 60,000
// training and 10,000 test images of 28x28 grey pixels in 10 classes, read from the package's gzip'd
// IDX files with zlib.
#ifndef RMSNORM_REPRO_DATA_FASHION_MNIST_H_
#define RMSNORM_REPRO_DATA_FASHION_MNIST_H_

#include <cstdint>
#include <string>
#include <vector>

namespace repro {

constexpr const char* kFashionMnistPackage = "dataset-fashion-mnist";
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct ImageSet {
  int64_t count = 0;
  int64_t pixels = 0;           // 784
  std::vector<float> images;    // (count, pixels): standardized, (v/255 - mean) / std over the training set
  std::vector<int32_t> labels;  // (count) in [0, 10)
};

struct FashionMnist {
  ImageSet train, test;
  static constexpr int kClasses = 10;
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from dir. Throws MissingData naming the
// package when a file is missing, std::runtime_error when one is malformed.
FashionMnist load_fashion_mnist(const std::string& dir = kFashionMnistDir);

}  // namespace repro

#endif  // RMSNORM_REPRO_DATA_FASHION_MNIST_H_
