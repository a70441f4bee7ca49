#include "daemon/worker/memory.h"

#include <malloc.h>
#include <unistd.h>

#include <fstream>

#include "daemon/engine/device_memory.h"
#include "daemon/engine/host_pool.h"

namespace medq::daemon {

int64_t ResidentSetBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

MemorySnapshot TakeMemorySnapshot() {
  MemorySnapshot snap;
  snap.rss_bytes = ResidentSetBytes();
  for (const engine::DeviceMemory& d : engine::QueryDeviceMemory()) {
    snap.devices.push_back(DeviceMemoryInfo{d.index, d.name, d.total_bytes, d.measured,
                                            d.free_bytes, d.allocated_bytes, d.reserved_bytes});
  }
  return snap;
}

void ReleaseCachedMemory() {
  engine::EmptyDeviceCaches();
  engine::ReleasePooledHostMemory();
  malloc_trim(0);
}

}  // namespace medq::daemon
