# Cross builds for 64-bit ARM Linux (Jetson Orin) with Debian's cross compiler
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross; tools/setup.sh installs them):
#   cmake -S . -B build-aarch64 -DDRK_RUNTIME_ONLY=ON -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# The binaries run here under qemu-user (qemu-aarch64 -L /usr/aarch64-linux-gnu BINARY).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
# programs (drkc) run on the build machine; packages (an aarch64 drkc install prefix given in
# CMAKE_PREFIX_PATH) may lie outside the root path
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
