#include "daemon/engine/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/file_read.h"

namespace medq::engine {
namespace {

struct DtypeEntry {
  std::string_view name;
  StDtype dtype;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {"F64", StDtype::kF64, 8},   {"F32", StDtype::kF32, 4}, {"F16", StDtype::kF16, 2},
    {"BF16", StDtype::kBF16, 2}, {"I64", StDtype::kI64, 8}, {"I32", StDtype::kI32, 4},
    {"I16", StDtype::kI16, 2},   {"I8", StDtype::kI8, 1},   {"U8", StDtype::kU8, 1},
    {"BOOL", StDtype::kBool, 1},
};

Error Invalid(const std::filesystem::path& path, const std::string& what) {
  return Error(ErrorCode::kInvalidRequest, "invalid safetensors file " + path.string() + ": " +
                                               what + "; re-download or re-export the model");
}

std::string TensorName(const std::string& name) {
  return "tensor '" + name + "'";
}

// Parses one header entry into `info`; returns an error message or "".
std::string ParseEntry(const std::string& name, const nlohmann::json& entry, size_t data_size,
                       StTensorInfo* info) {
  info->name = name;
  if (!entry.is_object()) return "entry is not an object";
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) return "missing or non-string 'dtype'";
  if (!ParseStDtype(dtype->get_ref<const std::string&>(), &info->dtype)) {
    return "unknown dtype '" + dtype->get<std::string>() + "'";
  }
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) return "missing or non-array 'shape'";
  if (shape->size() > 16) return "shape has more than 16 dimensions";
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned()) return "shape holds a value that is not a non-negative integer";
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return "dimension too big";
    info->shape.push_back(static_cast<int64_t>(d));
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / d) overflow = true;
    numel *= d;
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return "'data_offsets' is not a pair of non-negative integers";
  }
  const uint64_t begin = (*offsets)[0].get<uint64_t>();
  const uint64_t end = (*offsets)[1].get<uint64_t>();
  if (begin > end) return "data_offsets begin > end";
  if (end > data_size) {
    return "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           ") run past the data section (" + std::to_string(data_size) + " bytes)";
  }
  const size_t elem = StDtypeSize(info->dtype);
  if (overflow || numel > std::numeric_limits<uint64_t>::max() / elem ||
      numel * elem != end - begin) {
    return "dtype " + std::string(StDtypeName(info->dtype)) + " x shape needs " +
           (overflow ? std::string("an overflowing number of") : std::to_string(numel * elem)) +
           " bytes but data_offsets span " + std::to_string(end - begin);
  }
  info->begin = begin;
  info->end = end;
  return "";
}

}  // namespace

bool ParseStDtype(std::string_view name, StDtype* out) {
  for (const auto& e : kDtypes) {
    if (e.name == name) {
      *out = e.dtype;
      return true;
    }
  }
  return false;
}

std::string_view StDtypeName(StDtype dtype) {
  for (const auto& e : kDtypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "?";
}

size_t StDtypeSize(StDtype dtype) {
  for (const auto& e : kDtypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 1;
}

int64_t StTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(
    const std::filesystem::path& path) {
  struct stat st {};
  // Never blocks: a FIFO named like a shard is refused, not waited on.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) {
    return Error(ErrorCode::kModelNotFound, "cannot open safetensors file " + ModelFileName(path) +
                                                ": " + std::strerror(ENOENT));
  }
  auto opened = OpenRegularFile(path, &st);
  if (!opened.ok()) return opened.error();
  const int fd = *opened;
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    return Invalid(path, "truncated: " + std::to_string(file_size) +
                             " bytes, shorter than the 8-byte header length");
  }
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file referenced
  if (map == MAP_FAILED) {
    return Error(ErrorCode::kInternal,
                 "cannot memory-map " + path.string() + ": " + std::strerror(map_err));
  }
  // Weights are read front to back right after opening: start the reads now.
  ::madvise(map, file_size, MADV_WILLNEED);
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = file_size;

  const auto* bytes = static_cast<const unsigned char*>(map);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeaderBytes) {
    return Invalid(path, "header length " + std::to_string(header_len) + " exceeds the " +
                             std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  if (header_len > file_size - 8) {
    return Invalid(path, "header length " + std::to_string(header_len) +
                             " runs past the end of the file (" + std::to_string(file_size) +
                             " bytes): the file is truncated or corrupt");
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  const nlohmann::json header =
      nlohmann::json::parse(header_begin, header_begin + header_len, nullptr, false);
  if (header.is_discarded()) return Invalid(path, "header is not well-formed JSON");
  if (!header.is_object()) return Invalid(path, "header is not a JSON object");

  const uint64_t data_size = file_size - 8 - header_len;
  file->data_ = reinterpret_cast<const std::byte*>(bytes + 8 + header_len);
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    StTensorInfo info;
    const std::string problem = ParseEntry(name, entry, data_size, &info);
    if (!problem.empty()) return Invalid(path, TensorName(name) + ": " + problem);
    file->tensors_.push_back(std::move(info));
  }
  std::sort(file->tensors_.begin(), file->tensors_.end(),
            [](const StTensorInfo& a, const StTensorInfo& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  for (size_t i = 1; i < file->tensors_.size(); ++i) {
    const auto& prev = file->tensors_[i - 1];
    const auto& cur = file->tensors_[i];
    if (cur.begin < prev.end) {
      return Invalid(path, TensorName(cur.name) + " overlaps " + TensorName(prev.name) +
                               " in the data section");
    }
  }
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const StTensorInfo* SafetensorsFile::Find(std::string_view name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Status WriteSafetensors(const std::filesystem::path& path,
                        const std::vector<StWriteTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape)
      numel *= static_cast<uint64_t>(d);
    if (numel * StDtypeSize(t.dtype) != t.nbytes) {
      return Error(ErrorCode::kInvalidRequest, "WriteSafetensors: tensor '" + t.name + "' has " +
                                                   std::to_string(t.nbytes) +
                                                   " bytes, its dtype and shape need " +
                                                   std::to_string(numel * StDtypeSize(t.dtype)));
    }
    header[t.name] = {{"dtype", StDtypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0)
    text.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) {
    out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.nbytes));
  }
  out.close();
  if (!out) return Error(ErrorCode::kInternal, "cannot write safetensors file " + path.string());
  return Status::Ok();
}

}  // namespace medq::engine
