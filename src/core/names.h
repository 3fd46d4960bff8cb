// Names of the C API's enum values, as they appear in messages, case strings and the tool.
#pragma once

#include "gdn/gdn.h"

namespace gdn {

inline const char* gate_name(gdn_gate_mode g) {
  switch (g) {
    case GDN_GATE_LOG_DECAY: return "log_decay";
    case GDN_GATE_DECAY_RATE: return "decay_rate";
    case GDN_GATE_RAW: return "raw";
  }
  return "unknown gate";
}

inline const char* beta_mode_name(gdn_beta_mode b) {
  switch (b) {
    case GDN_BETA_PROB: return "prob";
    case GDN_BETA_LOGIT: return "logit";
  }
  return "unknown beta mode";
}

inline const char* head_map_name(gdn_head_map m) {
  switch (m) {
    case GDN_HEAD_MAP_BLOCK: return "block";
    case GDN_HEAD_MAP_TILED: return "tiled";
  }
  return "unknown head map";
}

inline const char* state_layout_name(gdn_state_layout l) {
  switch (l) {
    case GDN_STATE_VK: return "vk";
    case GDN_STATE_KV: return "kv";
  }
  return "unknown state layout";
}

inline const char* backend_name(gdn_backend b) {
  switch (b) {
    case GDN_BACKEND_AUTO: return "auto";
    case GDN_BACKEND_CPU: return "cpu";
    case GDN_BACKEND_CUDA: return "cuda";
    case GDN_BACKEND_REFERENCE: return "reference";
  }
  return "unknown backend";
}

inline const char* path_name(gdn_path p) {
  switch (p) {
    case GDN_PATH_AUTO: return "auto";
    case GDN_PATH_RECURRENT: return "recurrent";
    case GDN_PATH_CHUNKED: return "chunked";
  }
  return "unknown path";
}

inline const char* device_name(gdn_device_type d) {
  switch (d) {
    case GDN_DEVICE_CPU: return "cpu";
    case GDN_DEVICE_CUDA: return "cuda";
  }
  return "unknown device";
}

}  // namespace gdn
