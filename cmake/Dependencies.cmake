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
# The durable job store (daemon/store/): SQLite, WAL, one file.
find_package(SQLite3 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
if(MEDQ_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
  include(Catch)
endif()

# For a CUDA LibTorch, TorchConfig enables the CUDA language and would try to
# detect the local GPUs' architectures; medq compiles no CUDA sources itself,
# so a fixed list (the reference RTX 4050 is 8.9) keeps configure working on
# machines without a GPU, and C++17 is a CUDA dialect every nvcc CMake knows.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.9")
endif()
if(NOT DEFINED CMAKE_CUDA_STANDARD)
  set(CMAKE_CUDA_STANDARD 17)
endif()
# TorchConfig finds its libraries with find_library, which searches the
# system's directories before its own: with Debian's libtorch-dev installed,
# `-DCMAKE_PREFIX_PATH=<libtorch>/share/cmake` alone would mix the upstream
# headers with Debian's 1.13 libtorch.so. Searching <libtorch> as a prefix
# first keeps each LibTorch whole.
set(_medq_prefixes)
foreach(p IN LISTS CMAKE_PREFIX_PATH)
  if(p MATCHES "^(.*)/share/cmake/?$")
    list(APPEND _medq_prefixes "${CMAKE_MATCH_1}")
  endif()
  list(APPEND _medq_prefixes "${p}")
endforeach()
set(CMAKE_PREFIX_PATH ${_medq_prefixes})
find_package(Torch REQUIRED)
get_filename_component(_medq_torch_lib_dir "${TORCH_LIBRARY}" DIRECTORY)
get_filename_component(_medq_torch_prefix "${TORCH_INSTALL_PREFIX}" REALPATH)
get_filename_component(_medq_torch_lib_dir "${_medq_torch_lib_dir}" REALPATH)
if(NOT _medq_torch_lib_dir MATCHES "^${_medq_torch_prefix}" AND NOT TORCH_INSTALL_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "LibTorch's CMake files are in ${TORCH_INSTALL_PREFIX} but its library "
                      "was found at ${TORCH_LIBRARY}; pass -DCMAKE_PREFIX_PATH=<libtorch> "
                      "(the folder holding lib/ and share/)")
endif()
# medq passes std::string across LibTorch's API: a LibTorch built with the
# pre-C++11 ABI (old "Pre-cxx11 ABI" downloads) links but crashes at run time.
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR "LibTorch at ${TORCH_INSTALL_PREFIX} was built with the pre-C++11 ABI "
                      "(-D_GLIBCXX_USE_CXX11_ABI=0); medq needs the C++11 ABI build "
                      "(scripts/setup-torch installs one)")
endif()
# CUDA-only code (caching allocator, device memory stats) compiles only when
# this LibTorch was built with CUDA.
set(MEDQ_WITH_CUDA OFF)
if(TARGET torch_cuda OR TARGET c10_cuda OR TORCH_CUDA_LIBRARIES)
  set(MEDQ_WITH_CUDA ON)
endif()
if(MEDQ_WITH_CUDA)
  message(STATUS "medq: LibTorch ${Torch_VERSION}, CUDA ON, toolkit ${CUDAToolkit_VERSION} "
                 "(${CUDAToolkit_LIBRARY_DIR})")
else()
  message(STATUS "medq: LibTorch ${Torch_VERSION}, CUDA OFF")
endif()

# xgrammar's C++ core, the grammar engine behind structured output (JSON
# schemas become a token mask per step; vLLM, SGLang and TensorRT-LLM use the
# same): not packaged by Debian, so scripts/setup-xgrammar builds its pinned
# source distribution from PyPI into .deps/ (scripts/build runs it first).
# -DMEDQ_XGRAMMAR_ROOT=<prefix> names another build of it; the default is not
# cached, so that a new pinned version reaches existing build folders.
if(NOT MEDQ_XGRAMMAR_ROOT)
  set(MEDQ_XGRAMMAR_ROOT "${PROJECT_SOURCE_DIR}/.deps/xgrammar-0.2.8-medq2")
endif()
set(_medq_xgrammar_lib "${MEDQ_XGRAMMAR_ROOT}/lib/libxgrammar.a")
if(NOT EXISTS "${_medq_xgrammar_lib}" OR NOT EXISTS "${MEDQ_XGRAMMAR_ROOT}/include/xgrammar/xgrammar.h")
  message(FATAL_ERROR "xgrammar not found in ${MEDQ_XGRAMMAR_ROOT}: run scripts/setup-xgrammar "
                      "(or pass -DMEDQ_XGRAMMAR_ROOT=<prefix>)")
endif()
add_library(medq_xgrammar STATIC IMPORTED GLOBAL)
set_target_properties(medq_xgrammar PROPERTIES IMPORTED_LOCATION "${_medq_xgrammar_lib}")
target_include_directories(medq_xgrammar SYSTEM INTERFACE "${MEDQ_XGRAMMAR_ROOT}/include")
target_compile_definitions(medq_xgrammar INTERFACE XGRAMMAR_ENABLE_CPPTRACE=0
                                                   XGRAMMAR_ENABLE_INTERNAL_CHECK=0)
target_link_libraries(medq_xgrammar INTERFACE Threads::Threads)
