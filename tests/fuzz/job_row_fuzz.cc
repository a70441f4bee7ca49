// The durable job store's rows (daemon/store/job_row.h): what a corrupt or
// hostile jobs.db hands back is decoded by DecodeJobRow before the daemon
// trusts it. The input fills a RawJobRow: text columns from the front
// (separated by a backslash and a space), numbers from the back
// (libFuzzer's FuzzedDataProvider).
#include <fuzzer/FuzzedDataProvider.h>

#include "daemon/store/job_row.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace store = medq::daemon::store;
  FuzzedDataProvider in(data, size);
  store::RawJobRow row;
  row.id = in.ConsumeIntegral<int64_t>();
  row.priority = in.ConsumeIntegralInRange<int64_t>(-1, 3);
  row.created_at = in.ConsumeFloatingPoint<double>();
  if (in.ConsumeBool()) row.finished_at = in.ConsumeFloatingPoint<double>();
  const bool has_result = in.ConsumeBool();
  row.op = in.ConsumeRandomLengthString(16);
  row.owner = in.ConsumeRandomLengthString(32);
  row.state = in.ConsumeRandomLengthString(16);
  row.params = in.ConsumeRandomLengthString();
  if (has_result) row.result = in.ConsumeRemainingBytesAsString();
  if (auto job = store::DecodeJobRow(row); job.ok()) {
    // A decoded row's id prints and parses back.
    const auto id = store::ParseJobId(store::FormatJobId(job->id));
    if (!id || *id != job->id) medq::fuzz::Fail("a stored job's id does not read back");
  }
  (void)store::ParseJobId(row.owner);
  return 0;
}
