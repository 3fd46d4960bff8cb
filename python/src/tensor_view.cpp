#include "tensor_view.h"

#include <cstdint>
#include <string>

namespace gdn_py {

namespace {

using nb::dlpack::dtype_code;

gdn_dtype to_gdn_dtype(nb::dlpack::dtype d, bool bf16_bits) {
  if (d.lanes != 1) return GDN_DTYPE_NONE;
  switch (static_cast<dtype_code>(d.code)) {
    case dtype_code::Float:
      return d.bits == 32 ? GDN_DTYPE_F32 : d.bits == 16 ? GDN_DTYPE_F16
                          : d.bits == 64 ? GDN_DTYPE_F64 : GDN_DTYPE_NONE;
    case dtype_code::Bfloat: return d.bits == 16 ? GDN_DTYPE_BF16 : GDN_DTYPE_NONE;
    case dtype_code::Int:
      return d.bits == 32 ? GDN_DTYPE_I32 : d.bits == 64 ? GDN_DTYPE_I64 : GDN_DTYPE_NONE;
    case dtype_code::UInt: return (bf16_bits && d.bits == 16) ? GDN_DTYPE_BF16 : GDN_DTYPE_NONE;
    default: return GDN_DTYPE_NONE;
  }
}

std::string dtype_text(nb::dlpack::dtype d) {
  const char* kind = "unknown";
  switch (static_cast<dtype_code>(d.code)) {
    case dtype_code::Int: kind = "int"; break;
    case dtype_code::UInt: kind = "uint"; break;
    case dtype_code::Float: kind = "float"; break;
    case dtype_code::Bfloat: kind = "bfloat"; break;
    case dtype_code::Complex: kind = "complex"; break;
    case dtype_code::Bool: return "bool";
    default: break;
  }
  std::string s = kind + std::to_string(d.bits);
  if (d.lanes != 1) s += "x" + std::to_string(d.lanes);
  return s;
}

// DLPack device types: 1 CPU, 2 CUDA, 3 CUDA pinned host memory, 13 CUDA managed memory.
bool to_gdn_device(int dl_device, gdn_device_type* out) {
  switch (dl_device) {
    case 1: case 3: *out = GDN_DEVICE_CPU; return true;
    case 2: case 13: *out = GDN_DEVICE_CUDA; return true;
    default: return false;
  }
}

std::string python_type(nb::handle obj) { return nb::type_name(obj.type()).c_str(); }

// nb::try_cast without conversion: an array that does not fit is refused, never copied.
template <typename Array>
std::string import(nb::handle obj, const char* name, Array* out) {
  if (nb::try_cast<Array>(obj, *out, false)) return "";
  nb::ndarray<nb::ro> read_only;
  if (!Array::ReadOnly && nb::try_cast<nb::ndarray<nb::ro>>(obj, read_only, false))
    return std::string(name) + ": the array is read-only";
  return std::string(name) + ": expected an array that supports DLPack (__dlpack__) or the buffer "
         "protocol, got " + python_type(obj);
}

template <typename Array>
std::string describe(const Array& a, const char* name, bool bf16_bits, gdn_tensor* t) {
  const int ndim = static_cast<int>(a.ndim());
  if (ndim < 1 || ndim > GDN_MAX_DIMS)
    return std::string(name) + ": ndim=" + std::to_string(ndim) + " is outside [1, " +
           std::to_string(GDN_MAX_DIMS) + "]";
  t->dtype = to_gdn_dtype(a.dtype(), bf16_bits);
  if (t->dtype == GDN_DTYPE_NONE)
    return std::string(name) + ": dtype " + dtype_text(a.dtype()) +
           " is not one of float32, float16, bfloat16, float64, int32, int64";
  if (!to_gdn_device(a.device_type(), &t->device_type))
    return std::string(name) + ": DLPack device type " + std::to_string(a.device_type()) +
           " is neither the CPU nor CUDA";
  t->data = const_cast<void*>(static_cast<const void*>(a.data()));
  t->device_id = a.device_id();
  t->ndim = ndim;
  for (int i = 0; i < ndim; ++i) {
    t->shape[i] = static_cast<int64_t>(a.shape(i));
    // A dimension of extent 1 is never stepped over, so frameworks leave any stride there
    // (0 after broadcasting, anything after slicing). Give it the one the library expects.
    const int64_t stride = a.stride(i);
    t->strides[i] = t->shape[i] != 1 ? stride : (i == ndim - 1 || stride < 1) ? 1 : stride;
    // The C API reads all-zero strides as "contiguous": a broadcast view must not get there.
    if (t->strides[i] == 0)
      return std::string(name) + ": dimension " + std::to_string(i) +
             " is broadcast (stride 0); pass a materialised array";
  }
  return "";
}

}  // namespace

std::string view(nb::handle obj, const char* name, bool writable, bool bf16_bits, Imported* keep,
                 gdn_tensor* t) {
  *t = gdn_tensor{};
  if (obj.is_none()) return "";
  if (writable) {
    std::string error = import(obj, name, &keep->output);
    return error.empty() ? describe(keep->output, name, bf16_bits, t) : error;
  }
  std::string error = import(obj, name, &keep->input);
  return error.empty() ? describe(keep->input, name, bf16_bits, t) : error;
}

std::string flag_word(nb::handle obj, const char* name, Imported* keep, uint32_t** word) {
  *word = nullptr;
  if (obj.is_none()) return "";
  std::string error = import(obj, name, &keep->output);
  if (!error.empty()) return error;
  const nb::dlpack::dtype d = keep->output.dtype();
  const bool int32 = d.lanes == 1 && d.bits == 32 &&
                     (d.code == static_cast<uint8_t>(dtype_code::Int) ||
                      d.code == static_cast<uint8_t>(dtype_code::UInt));
  if (!int32 || keep->output.size() < 1)
    return std::string(name) + ": expected at least one int32 or uint32 element, got dtype " +
           dtype_text(d) + " with " + std::to_string(keep->output.size()) + " elements";
  *word = static_cast<uint32_t*>(keep->output.data());
  return "";
}

}  // namespace gdn_py
