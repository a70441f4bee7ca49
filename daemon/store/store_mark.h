// The store's mark: a small file beside the database, <state_dir>/jobs.mark,
// that lets the store see damage SQLite cannot, and keeps ids from ever
// repeating. Store thread only (and Open, before the loop serves).
//
// SQLite trusts what it finds: an emptied jobs.db opens as a new store, and a
// write-ahead log with a damaged frame is read up to that frame, silently
// dropping every commit after it. The mark holds, outside the database:
//   store     the store's identity, also in the database (meta table): a
//             database without it, or with another, was emptied or replaced;
//   commits   how many writes the store committed, also counted in the
//             database: a database behind its mark lost commits;
//   last_id   the largest id given out: after damage, ids from the
//             database's largest + 1 to this one are the jobs lost;
//   reserved  a floor no id is given below after damage, written (and
//             fsynced) before an id past it is given, in blocks, so that ids
//             never repeat even when the mark's other fields are stale.
// commits and last_id are written after each commit without an fsync: after
// a power loss they may lag the database (never lead it), which is not
// damage. A missing mark is a first start or a store from before the mark.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace medq::daemon::store {

struct StoreMark {
  std::string store;
  uint64_t commits = 0;
  uint64_t last_id = 0;
  uint64_t reserved = 0;
};

// Ids are reserved this many at a time.
inline constexpr uint64_t kIdBlock = 1024;

// nullopt when there is no mark; an error when it exists but cannot be read
// or parsed (the caller treats that as damage of the mark, not of the jobs).
Result<std::optional<StoreMark>> ReadStoreMark(const std::filesystem::path& path);
// Replaces the mark (a new file renamed over the old); with `durable`, the
// file and its directory are fsynced first.
Status WriteStoreMark(const std::filesystem::path& path, const StoreMark& mark, bool durable);
// A fresh store identity: 128 random bits, hex.
std::string NewStoreId();
// Whether `id` is one NewStoreId makes (32 lowercase hex digits): a mark or
// a database holding anything else as its identity is damaged.
bool IsStoreId(std::string_view id);

}  // namespace medq::daemon::store
