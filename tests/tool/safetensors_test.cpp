// The tool's safetensors reader and writer: files built byte by byte here, round trips, every
// kind of bad file, and (when Python's `safetensors` package is installed) files of the
// reference implementation in both directions.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "safetensors.h"

namespace fs = std::filesystem;
using gdn::harness::HostTensor;
using gdn::tool::read_safetensors;
using gdn::tool::safetensors_error;
using gdn::tool::TensorFile;
using gdn::tool::write_safetensors;

namespace {

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gdn_safetensors_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file of an 8-byte little-endian header length, the header text and the data.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                        uint64_t header_length_field) const {
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(char(header_length_field >> (8 * i)));
    bytes += header;
    bytes += data;
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data) const {
    return write_raw(name, header, data, header.size());
  }

  // The message of the safetensors_error that reading `file` throws.
  static std::string read_error(const std::string& file) {
    try {
      read_safetensors(file);
    } catch (const safetensors_error& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path dir_;
};

std::string le_bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

bool python_safetensors_available() {
  return std::system("python3 -c 'import safetensors' >/dev/null 2>&1") == 0;
}

std::string slurp(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_F(Safetensors, ReadsAHandBuiltFile) {
  const float a[2] = {1.5f, -2.f};
  const int64_t b = -7;
  const uint16_t c[3] = {0x3f80, 0x4000, 0xc040};  // bf16 1, 2, -3
  // Unpadded header of odd length: the data is not aligned in the file.
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
      R"("c":{"dtype":"BF16","shape":[1,3],"data_offsets":[16,22]},)"
      R"("e":{"dtype":"F16","shape":[0,4],"data_offsets":[22,22]},)"
      R"("__metadata__":{"format":"pt"}})";
  if (header.size() % 2 == 0) header += " ";
  std::string file = write_raw("hand.safetensors", header, le_bytes(a, 8) + le_bytes(&b, 8) + le_bytes(c, 6));

  TensorFile f = read_safetensors(file);
  ASSERT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  const HostTensor& ta = f.tensors.at("a");
  EXPECT_EQ(ta.dtype(), GDN_DTYPE_F32);
  EXPECT_EQ(ta.shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(ta.get(0), 1.5);
  EXPECT_EQ(ta.get(1), -2.0);
  EXPECT_EQ(f.tensors.at("b").shape().size(), 0u);
  EXPECT_EQ(f.tensors.at("b").numel(), 1);
  EXPECT_EQ(f.tensors.at("b").get(0), -7.0);
  EXPECT_EQ(f.tensors.at("c").dtype(), GDN_DTYPE_BF16);
  EXPECT_EQ(f.tensors.at("c").get(2), -3.0);
  EXPECT_EQ(f.tensors.at("e").numel(), 0);
}

TEST_F(Safetensors, RoundTripsEveryDtype) {
  TensorFile out;
  const gdn_dtype dtypes[] = {GDN_DTYPE_F32, GDN_DTYPE_F16, GDN_DTYPE_BF16,
                              GDN_DTYPE_F64, GDN_DTYPE_I32, GDN_DTYPE_I64};
  int index = 0;
  for (gdn_dtype dtype : dtypes) {
    HostTensor t(dtype, {2, 3, 1});
    auto* bytes = static_cast<unsigned char*>(t.data());
    for (size_t i = 0; i < t.bytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + index);
    out.tensors["t" + std::to_string(index++)] = std::move(t);
  }
  out.tensors["empty"] = HostTensor(GDN_DTYPE_F32, {4, 0});
  out.metadata["producer"] = "test";
  std::string file = path("round.safetensors");
  write_safetensors(file, out);

  std::string bytes = slurp(file);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  EXPECT_EQ((8 + header_length) % 8, 0u) << "the data starts 8-byte aligned";
  EXPECT_EQ(bytes[8], '{');

  TensorFile in = read_safetensors(file);
  EXPECT_EQ(in.metadata, out.metadata);
  ASSERT_EQ(in.tensors.size(), out.tensors.size());
  for (const auto& [name, t] : out.tensors) {
    const HostTensor& r = in.tensors.at(name);
    EXPECT_EQ(r.dtype(), t.dtype()) << name;
    EXPECT_EQ(r.shape(), t.shape()) << name;
    ASSERT_EQ(r.bytes(), t.bytes()) << name;
    EXPECT_EQ(std::memcmp(r.data(), t.data(), t.bytes()), 0) << name;
  }
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename(), "round.safetensors") << "a temporary file was left behind";
}

TEST_F(Safetensors, WriteReplacesAtomicallyAndLeavesNothingOnFailure) {
  TensorFile f;
  f.tensors["x"] = HostTensor(GDN_DTYPE_F32, {3});
  std::string file = path("x.safetensors");
  std::ofstream(file) << "old contents";
  write_safetensors(file, f);
  EXPECT_EQ(read_safetensors(file).tensors.at("x").numel(), 3);

  std::string missing_dir = path("no/such/dir/x.safetensors");
  EXPECT_THROW(write_safetensors(missing_dir, f), safetensors_error);
  EXPECT_FALSE(fs::exists(missing_dir));

  TensorFile bad;
  bad.tensors["x"] = HostTensor(GDN_DTYPE_F32, {3, 2}, {4, 1});  // a strided view: not written
  std::string untouched = path("untouched.safetensors");
  EXPECT_THROW(write_safetensors(untouched, bad), safetensors_error);
  EXPECT_FALSE(fs::exists(untouched));
}

TEST_F(Safetensors, RejectsBadFilesNamingTheFileAndTheProblem) {
  const std::string f32x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  struct BadFile {
    std::string name, header, data;
    std::string expected;  // part of the message
  };
  const BadFile cases[] = {
      {"not_json", "{\"a\": [1, 2", "", "not valid JSON"},
      {"not_object", "[1, 2, 3]", "", "not a JSON object"},
      {"unsupported_dtype", R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "ab",
       "tensor 'w': dtype U8 is not supported"},
      {"outside", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234",
       "tensor 'a': data_offsets [0,8] lie outside the data (4 bytes)"},
      {"size_mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight,
       "tensor 'a': shape [3] of F32 needs 12 bytes but data_offsets [0,8] span 8"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       eight, "tensors 'a' and 'b' overlap"},
      {"hole", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight,
       "data bytes [0, 4) belong to no tensor"},
      {"trailing", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight,
       "data bytes [4, 8) belong to no tensor"},
      {"reversed", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight, "end before they begin"},
      {"duplicate", f32x2.substr(0, f32x2.size() - 1) + R"(,"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       eight, "names tensor 'a' twice"},
      {"no_shape", R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight, "tensor 'a': no \"shape\""},
      {"negative_dim", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight,
       "not a non-negative integer"},
      {"huge_shape",
       R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight, "too large"},
      {"bad_metadata", R"({"__metadata__":{"k":1}})", "", "__metadata__ entry 'k' is not a string"},
  };
  for (const BadFile& c : cases) {
    std::string file = write_raw(c.name + ".safetensors", c.header, c.data);
    std::string message = read_error(file);
    EXPECT_NE(message.find(file + ": "), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.name << ": " << message;
  }
}

TEST_F(Safetensors, RejectsTruncatedFiles) {
  std::string file = path("short.safetensors");
  std::ofstream(file, std::ios::binary) << "abc";
  EXPECT_NE(read_error(file).find("truncated: 3 bytes"), std::string::npos) << read_error(file);

  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string past_end = write_raw("past_end.safetensors", header, "", header.size() + 100);
  EXPECT_NE(read_error(past_end).find("runs past the end of the file"), std::string::npos) << read_error(past_end);

  std::string cut = write_raw("cut.safetensors", header, "1234");
  EXPECT_NE(read_error(cut).find("outside the data"), std::string::npos) << read_error(cut);

  EXPECT_NE(read_error(path("absent.safetensors")).find("cannot open"), std::string::npos);
}

TEST_F(Safetensors, AgreesWithThePythonPackage) {
  if (!python_safetensors_available()) GTEST_SKIP() << "Python's safetensors package is not installed";

  // Python writes, we read.
  std::string from_python = path("from_python.safetensors");
  std::string script = path("write.py");
  // serialize_file takes dicts up to 0.6 and TensorSpec objects (raw pointers) after.
  std::ofstream(script) << "import ctypes, struct, sys, safetensors\n"
                           "buffers = []\n"
                           "def spec(dtype, shape, data):\n"
                           "    if not hasattr(safetensors, 'TensorSpec'):\n"
                           "        return {'dtype': dtype, 'shape': shape, 'data': data}\n"
                           "    buffers.append(ctypes.create_string_buffer(data, len(data)))\n"
                           "    return safetensors.TensorSpec(dtype=dtype, shape=shape,\n"
                           "        data_ptr=ctypes.addressof(buffers[-1]), data_len=len(data))\n"
                           "safetensors.serialize_file({\n"
                           "  'x': spec('float32', [2, 2], struct.pack('<4f', 1, 2, 3, 4)),\n"
                           "  'i': spec('int64', [3], struct.pack('<3q', -1, 0, 9)),\n"
                           "  'h': spec('bfloat16', [1], struct.pack('<H', 0x3f80)),\n"
                           "}, sys.argv[1], metadata={'who': 'python'})\n";
  ASSERT_EQ(std::system(("python3 " + script + " " + from_python).c_str()), 0);
  TensorFile f = read_safetensors(from_python);
  EXPECT_EQ(f.metadata.at("who"), "python");
  EXPECT_EQ(f.tensors.at("x").shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f.tensors.at("x").get(3), 4.0);
  EXPECT_EQ(f.tensors.at("i").get(0), -1.0);
  EXPECT_EQ(f.tensors.at("h").get(0), 1.0);

  // We write, Python reads.
  TensorFile out;
  HostTensor y(GDN_DTYPE_F32, {3});
  y.set(0, 0.5);
  y.set(1, 0.0);
  y.set(2, -8.0);
  out.tensors["y"] = y;
  out.tensors["n"] = HostTensor(GDN_DTYPE_I32, {2, 0});
  out.metadata["who"] = "gdn";
  std::string from_gdn = path("from_gdn.safetensors");
  write_safetensors(from_gdn, out);
  std::string check = path("read.py");
  std::ofstream(check) << "import struct, sys\n"
                          "import json\n"
                          "from safetensors import deserialize\n"
                          "t = dict(deserialize(open(sys.argv[1], 'rb').read()))\n"
                          "assert t['y']['dtype'] in ('F32', 'float32') and list(t['y']['shape']) == [3], t['y']\n"
                          "assert struct.unpack('<3f', bytes(t['y']['data'])) == (0.5, 0.0, -8.0)\n"
                          "assert t['n']['dtype'] in ('I32', 'int32') and list(t['n']['shape']) == [2, 0]\n"
                          "raw = open(sys.argv[1], 'rb').read()\n"
                          "n = struct.unpack('<Q', raw[:8])[0]\n"
                          "assert json.loads(raw[8:8 + n])['__metadata__'] == {'who': 'gdn'}\n";
  EXPECT_EQ(std::system(("python3 " + check + " " + from_gdn).c_str()), 0);
}
