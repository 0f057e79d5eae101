# Cross build for aarch64 Linux with Debian's cross compiler and multiarch arm64 packages
# (`make deps-arm64` installs them: g++-aarch64-linux-gnu, libhwy-dev:arm64, libgtest-dev:arm64,
# libgomp1:arm64, qemu-user). `make test-arm64` builds with it and runs the tests; by hand:
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DRMSNORM_BUILD_BENCH=OFF -DRMSNORM_BUILD_REPRO=OFF
#   cmake --build build-arm64 -j 2 && ctest --test-dir build-arm64 -j 2 -E install_test
# Test programs run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR below), for gtest_discover_tests at
# build time and for ctest alike.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(RMSNORM_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${RMSNORM_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${RMSNORM_CROSS_TRIPLE}-g++)
# Multiarch: arm64 packages put libraries and CMake packages under /usr/lib/aarch64-linux-gnu (Highway's
# under cmake/hwy, GoogleTest's under cmake/GTest) and share the headers in /usr/include; the C library
# and libgomp come with the cross compiler under /usr/aarch64-linux-gnu and /usr/lib/gcc-cross.
set(CMAKE_LIBRARY_ARCHITECTURE ${RMSNORM_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH /usr/${RMSNORM_CROSS_TRIPLE} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Test programs run under qemu-user with the CPU RMSNORM_QEMU_CPU (the cache variable, else the
# environment's, else `max,sve-default-vector-length=16`): `max` has SVE and SVE2, and at 128-bit vectors
# Highway runs SVE2_128, SVE2, SVE and NEON; at qemu's default 512 bits SVE emulates about ten times
# slower (SVE_256 needs 256 bits, `cortex-a72` has NEON alone). gtest_discover_tests lists the tests
# when rmsnorm_tests is linked: after changing the CPU, build in a new directory.
# `-L /`: the programs use the arm64 multiarch runtime (libc6:arm64 and libgomp1:arm64 in
# /lib/aarch64-linux-gnu, loaded by /lib/ld-linux-aarch64.so.1). Not `-L /usr/aarch64-linux-gnu`: that
# loader (libc6-arm64-cross, another build of glibc) would load the multiarch libc.so.6, the two disagree
# on the loader's data, and the first pthread_create spins forever (std::thread and OpenMP alike).
# One thread: the runs stay cheap on a 2-core machine.
if(NOT DEFINED RMSNORM_QEMU_CPU)
  if(DEFINED ENV{RMSNORM_QEMU_CPU})
    set(RMSNORM_QEMU_CPU $ENV{RMSNORM_QEMU_CPU})
  else()
    set(RMSNORM_QEMU_CPU max,sve-default-vector-length=16)
  endif()
endif()
set(RMSNORM_QEMU_CPU ${RMSNORM_QEMU_CPU} CACHE STRING "qemu-aarch64 -cpu for the tests run under emulation")
find_program(RMSNORM_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(NOT RMSNORM_QEMU_AARCH64)
  set(RMSNORM_QEMU_AARCH64 qemu-aarch64)
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR
    ${RMSNORM_QEMU_AARCH64} -L / -cpu ${RMSNORM_QEMU_CPU} -E RMSNORM_NUM_THREADS=1 -E OMP_NUM_THREADS=1)
