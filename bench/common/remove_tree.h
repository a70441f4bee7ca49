// Removing a benchmark's scratch folder without std::filesystem::remove_all.
//
// PyPI's LibTorch exports its own copies of parts of libstdc++ (torch 2.15's
// libtorch_cpu.so: 142 std::filesystem symbols), and a binary that links it
// may bind to those instead of libstdc++'s. On an H200 with torch 2.11,
// engine_bench and concurrency_bench bound remove_all to libtorch.so's copy,
// which calls address 0: both died after their last row, before printing
// their JSON. (Putting libstdc++ first among the binaries' libraries fixed
// the binding here but not on that machine's toolchain, CMake 4.4 and g++
// 13.) The benchmarks that link LibTorch remove their folders with nftw(3)
// from libc instead.
#pragma once

#include <ftw.h>

#include <cstdio>
#include <string>

namespace medq::bench {

// Removes `dir` and everything under it, depth first, not following
// symbolic links; what cannot be removed is left (a benchmark's cleanup,
// not a check).
inline void RemoveTree(const std::string& dir) {
  ::nftw(
      dir.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) {
        std::remove(path);
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace medq::bench
