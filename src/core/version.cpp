// The version of the library actually loaded (gdn.h's GDN_VERSION_* at build time).
#include "gdn/gdn.h"

#define GDN_STR2(x) #x
#define GDN_STR(x) GDN_STR2(x)

extern "C" {

int gdn_version(void) {
  return GDN_VERSION_MAJOR * 10000 + GDN_VERSION_MINOR * 100 + GDN_VERSION_PATCH;
}

const char* gdn_version_string(void) {
  return GDN_STR(GDN_VERSION_MAJOR) "." GDN_STR(GDN_VERSION_MINOR) "." GDN_STR(GDN_VERSION_PATCH);
}

}  // extern "C"
