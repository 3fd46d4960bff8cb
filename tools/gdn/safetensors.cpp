#include "safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this reader copies it as is");

namespace gdn::tool {
namespace {

using nlohmann::json;

// The header may not be larger than this (the reference implementation's limit).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct DtypeEntry {
  const char* name;
  gdn_dtype dtype;
  int64_t size;
};
constexpr DtypeEntry kDtypes[] = {
    {"F32", GDN_DTYPE_F32, 4}, {"F16", GDN_DTYPE_F16, 2}, {"BF16", GDN_DTYPE_BF16, 2},
    {"F64", GDN_DTYPE_F64, 8}, {"I32", GDN_DTYPE_I32, 4}, {"I64", GDN_DTYPE_I64, 8},
};

const DtypeEntry* find_dtype(gdn_dtype dtype) {
  for (const DtypeEntry& e : kDtypes)
    if (e.dtype == dtype) return &e;
  return nullptr;
}

const DtypeEntry* find_dtype(const std::string& name) {
  for (const DtypeEntry& e : kDtypes)
    if (name == e.name) return &e;
  return nullptr;
}

// numel * element size, or -1 when it does not fit in int64.
int64_t byte_count(const std::vector<int64_t>& shape, int64_t element_size) {
  int64_t n = element_size;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

bool is_contiguous(const harness::HostTensor& t) {
  int64_t expected = 1;
  for (size_t d = t.shape().size(); d-- > 0;) {
    if (t.shape()[d] != 1 && t.strides()[d] != expected) return false;
    expected *= t.shape()[d];
  }
  return true;
}

std::string errno_text() { return std::strerror(errno); }

// A tensor's entry in the header, before its bytes are read.
struct HeaderEntry {
  std::string name;
  const DtypeEntry* dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& path, uint64_t data_bytes) : path_(path), data_bytes_(data_bytes) {}

  void parse(const std::string& text, TensorFile& file, std::vector<HeaderEntry>& entries) const {
    json header = parse_json(text);
    if (!header.is_object()) fail("the header is not a JSON object");
    for (auto& [name, value] : header.items()) {
      if (name == "__metadata__")
        file.metadata = parse_metadata(value);
      else
        entries.push_back(parse_entry(name, value));
    }
    check_layout(entries);
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw safetensors_error(path_ + ": " + problem);
  }

  json parse_json(const std::string& text) const {
    std::set<std::string> names;
    std::string duplicate;
    auto reject_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
      if (depth == 1 && event == json::parse_event_t::key &&
          !names.insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    };
    json header;
    try {
      header = json::parse(text, reject_duplicates);
    } catch (const json::exception& e) {
      fail(std::string("the header is not valid JSON (") + e.what() + ")");
    }
    if (!duplicate.empty()) fail("the header names tensor '" + duplicate + "' twice");
    return header;
  }

  std::map<std::string, std::string> parse_metadata(const json& value) const {
    if (!value.is_object()) fail("__metadata__ is not a JSON object");
    std::map<std::string, std::string> metadata;
    for (auto& [key, item] : value.items()) {
      if (!item.is_string()) fail("__metadata__ entry '" + key + "' is not a string");
      metadata[key] = item.get<std::string>();
    }
    return metadata;
  }

  HeaderEntry parse_entry(const std::string& name, const json& value) const {
    const std::string where = "tensor '" + name + "': ";
    if (!value.is_object()) fail(where + "its header entry is not a JSON object");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!value.contains(field)) fail(where + "no \"" + field + "\" in its header entry");

    HeaderEntry entry{name, nullptr, {}, 0, 0};
    const json& dtype = value["dtype"];
    if (!dtype.is_string()) fail(where + "dtype is not a string");
    entry.dtype = find_dtype(dtype.get<std::string>());
    if (!entry.dtype)
      fail(where + "dtype " + dtype.get<std::string>() +
           " is not supported (supported: F32, F16, BF16, F64, I32, I64)");

    const json& shape = value["shape"];
    if (!shape.is_array()) fail(where + "shape is not an array");
    for (const json& d : shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(where + "shape " + shape.dump() + " has an entry that is not a non-negative integer");
      entry.shape.push_back(d.get<int64_t>());
    }

    const json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      fail(where + "data_offsets " + offsets.dump() + " is not a pair of non-negative integers");
    entry.begin = offsets[0].get<uint64_t>();
    entry.end = offsets[1].get<uint64_t>();
    if (entry.begin > entry.end) fail(where + "data_offsets " + offsets.dump() + " end before they begin");
    if (entry.end > data_bytes_)
      fail(where + "data_offsets " + offsets.dump() + " lie outside the data (" +
           std::to_string(data_bytes_) + " bytes)");

    int64_t expected = byte_count(entry.shape, entry.dtype->size);
    if (expected < 0) fail(where + "shape " + shape.dump() + " is too large");
    if (uint64_t(expected) != entry.end - entry.begin)
      fail(where + "shape " + shape.dump() + " of " + entry.dtype->name + " needs " +
           std::to_string(expected) + " bytes but data_offsets " + offsets.dump() + " span " +
           std::to_string(entry.end - entry.begin));
    return entry;
  }

  // Every byte of the data belongs to exactly one tensor: no overlaps, no holes.
  void check_layout(std::vector<HeaderEntry>& entries) const {
    std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t covered = 0;
    const HeaderEntry* previous = nullptr;
    for (const HeaderEntry& e : entries) {
      if (e.begin < covered)
        fail("tensors '" + previous->name + "' and '" + e.name + "' overlap in the data");
      if (e.begin > covered)
        fail("data bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
             ") belong to no tensor");
      covered = e.end;
      previous = &e;
    }
    if (covered != data_bytes_)
      fail("data bytes [" + std::to_string(covered) + ", " + std::to_string(data_bytes_) +
           ") belong to no tensor");
  }

  const std::string& path_;
  uint64_t data_bytes_;
};

// Closes and removes a temporary file unless released.
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::string& target) : path_(target + ".partial-XXXXXX") {
    fd_ = ::mkstemp(path_.data());
    if (fd_ < 0) throw safetensors_error(target + ": cannot create a temporary file beside it: " + errno_text());
  }
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  void write(const void* data, size_t bytes, const std::string& target) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      ssize_t n = ::write(fd_, p, bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw safetensors_error(target + ": write failed: " + errno_text());
      p += n;
      bytes -= size_t(n);
    }
  }

  // Gives the file the permissions a newly created file gets, closes it and renames it.
  void commit(const std::string& target) {
    mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd_, 0666 & ~mask) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      throw safetensors_error(target + ": cannot finish writing: " + errno_text());
    }
    fd_ = -1;
    if (std::rename(path_.c_str(), target.c_str()) != 0)
      throw safetensors_error(target + ": cannot rename the temporary file into place: " + errno_text());
    path_.clear();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

const char* safetensors_dtype_name(gdn_dtype dtype) {
  const DtypeEntry* entry = find_dtype(dtype);
  return entry ? entry->name : "none";
}

TensorFile read_safetensors(const std::string& path) {
  auto fail = [&](const std::string& problem) -> void { throw safetensors_error(path + ": " + problem); };

  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open: " + errno_text());
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) fail("not a regular file");
  in.seekg(0, std::ios::end);
  const uint64_t file_bytes = uint64_t(in.tellg());
  in.seekg(0);

  if (file_bytes < 8)
    fail("truncated: " + std::to_string(file_bytes) + " bytes, fewer than the 8-byte header length");
  unsigned char length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | length_bytes[i];
  if (header_bytes > file_bytes - 8)
    fail("the header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
         std::to_string(file_bytes) + " bytes): truncated or not a safetensors file");
  if (header_bytes > kMaxHeaderBytes)
    fail("the header length " + std::to_string(header_bytes) + " exceeds the " +
         std::to_string(kMaxHeaderBytes) + "-byte limit");

  std::string text(header_bytes, '\0');
  in.read(text.data(), std::streamsize(header_bytes));
  if (!in) fail("read failed in the header");

  TensorFile file;
  std::vector<HeaderEntry> entries;
  HeaderParser(path, file_bytes - 8 - header_bytes).parse(text, file, entries);

  const uint64_t data_start = 8 + header_bytes;
  for (const HeaderEntry& e : entries) {
    harness::HostTensor t(e.dtype->dtype, e.shape);
    in.seekg(std::streamoff(data_start + e.begin));
    in.read(static_cast<char*>(t.data()), std::streamsize(t.bytes()));
    if (!in) fail("read failed in the data of tensor '" + e.name + "'");
    file.tensors.emplace(e.name, std::move(t));
  }
  return file;
}

void write_safetensors(const std::string& path, const TensorFile& file) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    const DtypeEntry* dtype = find_dtype(t.dtype());
    if (name.empty() || name == "__metadata__")
      throw safetensors_error(path + ": '" + name + "' cannot name a tensor");
    if (!dtype) throw safetensors_error(path + ": tensor '" + name + "' has no safetensors dtype");
    if (!is_contiguous(t))
      throw safetensors_error(path + ": tensor '" + name + "' is a strided view; only contiguous tensors are written");
    header[name] = {{"dtype", dtype->name},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;

  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));

  TemporaryFile out(path);
  out.write(length_bytes, 8, path);
  out.write(text.data(), text.size(), path);
  for (const auto& entry : file.tensors) out.write(entry.second.data(), entry.second.bytes(), path);
  out.commit(path);
}

}  // namespace gdn::tool
