#!/bin/sh
# Installs the build into a scratch prefix, then builds programs against the installed copy only:
# the C ABI test through pkg-config, and the C++ example through find_package(rmsnorm).
set -eu
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix

cmake --install "$build_dir" --prefix "$prefix" > "$scratch/install.log"
libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -n 1 | xargs dirname)
export PKG_CONFIG_PATH=$libdir/pkgconfig
export LD_LIBRARY_PATH=$libdir

# C, with nothing but what pkg-config says.
cc -std=c99 -o "$scratch/c_api_test" "$source_dir/tests/c_api_test.c" $(pkg-config --cflags --libs rmsnorm) -lm
"$scratch/c_api_test"

# C++, through the CMake package.
mkdir "$scratch/consumer"
cat > "$scratch/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(rmsnorm 0.1 REQUIRED)
add_executable(example_cpp "$source_dir/examples/example.cc")
target_link_libraries(example_cpp PRIVATE rmsnorm::rmsnorm)
CMAKE
cmake -S "$scratch/consumer" -B "$scratch/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" > "$scratch/configure.log"
cmake --build "$scratch/consumer/build" > "$scratch/build.log"
"$scratch/consumer/build/example_cpp"
echo "install_test: installed headers, library, CMake package and pkg-config file work"
