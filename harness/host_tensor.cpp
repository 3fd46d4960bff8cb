// HostTensor: a strided view into aligned host storage, element access as f64, poison.
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/dtype.h"
#include "harness.h"

namespace gdn::harness {
namespace {

constexpr size_t kAlignment = 64;

template <class T>
T read(const char* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

template <class T>
void write(char* p, T x) {
  std::memcpy(p, &x, sizeof x);
}

// p[i] = convert(x[i]) for i < n, p holding the converted type
template <class Convert>
void write_row(char* p, const double* x, int64_t n, Convert convert) {
  for (int64_t i = 0; i < n; ++i) write(p + i * sizeof(convert(x[i])), convert(x[i]));
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

}  // namespace

void HostTensor::Free::operator()(void* p) const { std::free(p); }

uint64_t poison_bits(gdn_dtype dtype) {
  switch (dtype) {
    case GDN_DTYPE_F32: return 0x7fa5a5a5u;            // signalling NaN
    case GDN_DTYPE_BF16: return 0x7fa5u;               // signalling NaN
    case GDN_DTYPE_F16: return 0x7d5au;                // signalling NaN
    case GDN_DTYPE_F64: return 0x7ff4a5a5a5a5a5a5ull;  // signalling NaN
    case GDN_DTYPE_I32: return 0xa5a5a5a5u;
    case GDN_DTYPE_I64: return 0xa5a5a5a5a5a5a5a5ull;
    default: return 0;
  }
}

HostTensor::HostTensor(gdn_dtype dtype, std::vector<int64_t> shape, std::vector<int64_t> strides)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)) {
  if (dtype_size(dtype_) == 0) throw std::invalid_argument("HostTensor: no element size");
  if (strides_.empty()) strides_ = contiguous_strides(shape_);
  if (strides_.size() != shape_.size() || (!strides_.empty() && strides_.back() != 1))
    throw std::invalid_argument("HostTensor: strides must match the shape and end in 1");
  size_t bytes = this->bytes();
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  storage_.reset(std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded));
  if (!storage_) throw std::runtime_error("HostTensor: out of host memory");
}

HostTensor::HostTensor(const HostTensor& other) { *this = other; }

HostTensor& HostTensor::operator=(const HostTensor& other) {
  if (this == &other) return *this;
  if (!other.present()) {
    *this = HostTensor();
    return *this;
  }
  HostTensor copy(other.dtype_, other.shape_, other.strides_);
  std::memcpy(copy.data(), other.data(), other.bytes());
  return *this = std::move(copy);
}

int64_t HostTensor::numel() const {
  if (!present()) return 0;
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

int64_t HostTensor::storage_elements() const {
  if (numel() == 0) return 0;
  int64_t last = 0;
  for (size_t d = 0; d < shape_.size(); ++d) last += (shape_[d] - 1) * strides_[d];
  return last + 1;
}

size_t HostTensor::bytes() const { return size_t(storage_elements() * dtype_size(dtype_)); }

int64_t HostTensor::offset(int64_t index) const {
  int64_t off = 0;
  for (size_t d = shape_.size(); d-- > 0;) {
    off += (index % shape_[d]) * strides_[d];
    index /= shape_[d];
  }
  return off;
}

double HostTensor::get(int64_t index) const {
  const char* p = static_cast<const char*>(data()) + offset(index) * dtype_size(dtype_);
  switch (dtype_) {
    case GDN_DTYPE_F32: return read<float>(p);
    case GDN_DTYPE_F64: return read<double>(p);
    case GDN_DTYPE_BF16: return bf16_to_f32(read<uint16_t>(p));
    case GDN_DTYPE_F16: return f16_to_f32(read<uint16_t>(p));
    case GDN_DTYPE_I32: return read<int32_t>(p);
    case GDN_DTYPE_I64: return double(read<int64_t>(p));
    default: throw std::logic_error("HostTensor::get: absent tensor");
  }
}

void HostTensor::set(int64_t index, double x) {
  char* p = static_cast<char*>(data()) + offset(index) * dtype_size(dtype_);
  switch (dtype_) {
    case GDN_DTYPE_F32: return write(p, float(x));
    case GDN_DTYPE_F64: return write(p, x);
    case GDN_DTYPE_BF16: return write(p, f32_to_bf16(float(x)));
    case GDN_DTYPE_F16: return write(p, f32_to_f16(float(x)));
    case GDN_DTYPE_I32: return write(p, int32_t(x));
    case GDN_DTYPE_I64: return write(p, int64_t(x));
    default: throw std::logic_error("HostTensor::set: absent tensor");
  }
}

void HostTensor::set_row(int64_t row, const double* x) {
  const int64_t n = shape_.empty() ? 1 : shape_.back();
  char* p = static_cast<char*>(data()) + offset(row * n) * dtype_size(dtype_);
  switch (dtype_) {
    case GDN_DTYPE_F32: return write_row(p, x, n, [](double d) { return float(d); });
    case GDN_DTYPE_F64: return write_row(p, x, n, [](double d) { return d; });
    case GDN_DTYPE_BF16: return write_row(p, x, n, [](double d) { return f32_to_bf16(float(d)); });
    case GDN_DTYPE_F16: return write_row(p, x, n, [](double d) { return f32_to_f16(float(d)); });
    case GDN_DTYPE_I32: return write_row(p, x, n, [](double d) { return int32_t(d); });
    case GDN_DTYPE_I64: return write_row(p, x, n, [](double d) { return int64_t(d); });
    default: throw std::logic_error("HostTensor::set_row: absent tensor");
  }
}

void HostTensor::fill_poison() {
  const uint64_t bits = poison_bits(dtype_);
  const int64_t size = dtype_size(dtype_);
  char* p = static_cast<char*>(data());
  for (int64_t i = 0, n = storage_elements(); i < n; ++i) std::memcpy(p + i * size, &bits, size);
}

gdn_tensor HostTensor::view(void* at, gdn_device_type device, int device_id) const {
  gdn_tensor t{};
  if (!present()) return t;
  t.data = at ? at : const_cast<void*>(data());
  t.dtype = dtype_;
  t.ndim = int32_t(shape_.size());
  for (size_t d = 0; d < shape_.size(); ++d) {
    t.shape[d] = shape_[d];
    t.strides[d] = strides_[d];
  }
  t.device_type = device;
  t.device_id = device_id;
  return t;
}

}  // namespace gdn::harness
