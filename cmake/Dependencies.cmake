# Every dependency comes from a Debian package (scripts/setup-deps installs
# them). LibTorch may instead be an upstream CUDA build given with
# -DCMAKE_PREFIX_PATH=<libtorch>/share/cmake.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# sd_notify, socket activation and the watchdog, as systemd documents them.
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
if(MEDQ_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
  include(Catch)
endif()

find_package(Torch REQUIRED)
# CUDA-only code (caching allocator, device memory stats) compiles only when
# this LibTorch was built with CUDA.
set(MEDQ_WITH_CUDA OFF)
if(TARGET torch_cuda OR TARGET c10_cuda OR TORCH_CUDA_LIBRARIES)
  set(MEDQ_WITH_CUDA ON)
endif()
message(STATUS "medq: LibTorch ${Torch_VERSION}, CUDA ${MEDQ_WITH_CUDA}")
