// Case strings: "key=value,key=value"; the keys are listed beside Case's fields in harness.h.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "case_rules.h"
#include "core/dtype.h"
#include "core/names.h"
#include "harness.h"

namespace gdn::harness {
namespace {

[[noreturn]] void bad(const std::string& key, const std::string& value, const std::string& why) {
  throw std::invalid_argument("case: " + key + "=" + value + ": " + why);
}

int64_t parse_int(const std::string& key, const std::string& value, int64_t min) {
  char* end = nullptr;
  long long x = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0') bad(key, value, "not an integer");
  if (x < min) bad(key, value, "must be >= " + std::to_string(min));
  return x;
}

bool parse_bool(const std::string& key, const std::string& value) {
  if (value == "1") return true;
  if (value == "0") return false;
  bad(key, value, "must be 0 or 1");
}

gdn_dtype parse_dtype(const std::string& key, const std::string& value, bool state) {
  for (gdn_dtype t : {GDN_DTYPE_F32, GDN_DTYPE_BF16, GDN_DTYPE_F16}) {
    if (value == dtype_name(t) && !(state && t == GDN_DTYPE_F16)) return t;
  }
  bad(key, value, state ? "must be f32 or bf16" : "must be f32, bf16 or f16");
}

// The enum value of type E whose name(E) is `value`, among values 0..count-1.
template <class E>
E parse_enum(const std::string& key, const std::string& value, const char* (*name)(E), int count) {
  std::string known;
  for (int i = 0; i < count; ++i) {
    if (value == name(E(i))) return E(i);
    known += (i ? ", " : "") + std::string(name(E(i)));
  }
  bad(key, value, "must be one of " + known);
}

std::vector<int64_t> parse_seqlens(const std::string& key, const std::string& value) {
  std::vector<int64_t> lens;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ':')) lens.push_back(parse_int(key, item, 0));
  if (lens.empty()) bad(key, value, "needs at least one length");
  return lens;
}

float parse_scale(const std::string& key, const std::string& value) {
  char* end = nullptr;
  const float x = std::strtof(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(x)) bad(key, value, "not a finite float (0: 1 / sqrt(K))");
  return x;
}

std::string parse_decay(const std::string& key, const std::string& value) {
  if (value != "normal" && value != "none" && value != "fast" && value != "slow" && value != "mixed")
    bad(key, value, "must be one of normal, none, fast, slow, mixed");
  return value;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

void set_key(Case& c, const std::string& k, const std::string& v) {
  if (k == "name") c.name = v;
  else if (k == "N") c.N = parse_int(k, v, 1);
  else if (k == "T") c.T = parse_int(k, v, 1);
  else if (k == "Hk") c.Hk = parse_int(k, v, 1);
  else if (k == "Hv") c.Hv = parse_int(k, v, 1);
  else if (k == "K") c.K = parse_int(k, v, 1);
  else if (k == "V") c.V = parse_int(k, v, 1);
  else if (k == "dtype") c.dtype = parse_dtype(k, v, false);
  else if (k == "gdtype") c.gate_dtype = parse_dtype(k, v, false);
  else if (k == "sdtype") c.state_dtype = parse_dtype(k, v, true);
  else if (k == "gate") c.gate = parse_enum<gdn_gate_mode>(k, v, gate_name, 3);
  else if (k == "beta") c.beta = parse_enum<gdn_beta_mode>(k, v, beta_mode_name, 2);
  else if (k == "map") c.map = parse_enum<gdn_head_map>(k, v, head_map_name, 2);
  else if (k == "layout") c.layout = parse_enum<gdn_state_layout>(k, v, state_layout_name, 2);
  else if (k == "l2norm") c.l2norm = parse_bool(k, v);
  else if (k == "scale") c.scale = parse_scale(k, v);
  else if (k == "packed") c.packed = parse_bool(k, v);
  else if (k == "seqlens") {
    c.seqlens = parse_seqlens(k, v);
    c.packed = true;
    c.N = int64_t(c.seqlens.size());
  } else if (k == "h0") c.initial_state = parse_bool(k, v);
  else if (k == "ht") c.final_state = parse_bool(k, v);
  else if (k == "inplace") c.in_place = parse_bool(k, v);
  else if (k == "pool") c.pool = parse_int(k, v, 0);
  else if (k == "pad") c.pad = parse_int(k, v, 0);
  else if (k == "snap") {
    c.snapshot_pool = v == "pool";
    c.snapshots = !c.snapshot_pool && parse_bool(k, v);
  } else if (k == "ckpt") c.ckpt = parse_int(k, v, 0);
  else if (k == "path") c.path = parse_enum<gdn_path>(k, v, path_name, 3);
  else if (k == "decay") c.decay = parse_decay(k, v);
  else if (k == "seed") c.seed = uint64_t(parse_int(k, v, 0));
  else if (k == "threads") c.threads = parse_int(k, v, 0);
  else if (k == "strided") c.strided = parse_bool(k, v);
  else if (k == "cu64") c.cu_seqlens_i64 = parse_bool(k, v);
  else bad(k, v, "unknown key");
}

}  // namespace

Case parse_case(const std::string& text) {
  Case c;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) bad(item, "", "expected key=value");
    set_key(c, trim(item.substr(0, eq)), trim(item.substr(eq + 1)));
  }
  check_case(c);
  return c;
}

std::string to_string(const Case& c) {
  const Case d;  // defaults: only keys that differ are written, sizes always
  std::string s;
  auto add = [&s](const std::string& key, const std::string& value) {
    s += (s.empty() ? "" : ",") + key + "=" + value;
  };
  if (!c.name.empty()) add("name", c.name);
  if (c.seqlens.empty()) add("N", std::to_string(c.N));
  if (!c.packed) add("T", std::to_string(c.T));
  add("Hk", std::to_string(c.Hk));
  add("Hv", std::to_string(c.Hv));
  add("K", std::to_string(c.K));
  add("V", std::to_string(c.V));
  if (c.dtype != d.dtype) add("dtype", dtype_name(c.dtype));
  if (c.gate_dtype != d.gate_dtype) add("gdtype", dtype_name(c.gate_dtype));
  if (c.state_dtype != d.state_dtype) add("sdtype", dtype_name(c.state_dtype));
  if (c.gate != d.gate) add("gate", gate_name(c.gate));
  if (c.beta != d.beta) add("beta", beta_mode_name(c.beta));
  if (c.map != d.map) add("map", head_map_name(c.map));
  if (c.layout != d.layout) add("layout", state_layout_name(c.layout));
  if (c.l2norm) add("l2norm", "1");
  if (c.scale != d.scale) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", double(c.scale));
    add("scale", buf);
  }
  if (!c.seqlens.empty()) {
    std::string lens;
    for (size_t i = 0; i < c.seqlens.size(); ++i)
      lens += (i ? ":" : "") + std::to_string(c.seqlens[i]);
    add("seqlens", lens);
  } else if (c.packed) {
    add("packed", "1");
    add("T", std::to_string(c.T));  // mean length of the random lengths
  }
  if (c.initial_state != d.initial_state) add("h0", c.initial_state ? "1" : "0");
  if (c.final_state != d.final_state) add("ht", c.final_state ? "1" : "0");
  if (c.in_place) add("inplace", "1");
  if (c.pool) add("pool", std::to_string(c.pool));
  if (c.pad) add("pad", std::to_string(c.pad));
  if (c.snapshots) add("snap", "1");
  if (c.snapshot_pool) add("snap", "pool");
  if (c.ckpt) add("ckpt", std::to_string(c.ckpt));
  if (c.path != d.path) add("path", path_name(c.path));
  if (c.decay != d.decay) add("decay", c.decay);
  if (c.seed != d.seed) add("seed", std::to_string(c.seed));
  if (c.threads != d.threads) add("threads", std::to_string(c.threads));
  if (c.strided) add("strided", "1");
  if (c.cu_seqlens_i64) add("cu64", "1");
  return s;
}

}  // namespace gdn::harness
