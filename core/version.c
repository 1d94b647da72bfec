/* The linked library's version, for callers to compare with the header's. */
#include "lockbridge/lockbridge.h"

const char *lb_version(void) { return LB_VERSION_STRING; }
