/* lockbridge: Redis locks for fleets moving from timestamp locks to token locks.
 * Including this header includes the whole public API. */
#ifndef LOCKBRIDGE_H
#define LOCKBRIDGE_H

#define LB_VERSION_MAJOR 0
#define LB_VERSION_MINOR 1
#define LB_VERSION_PATCH 0
#define LB_VERSION_STRING "0.1.0"
/* One number that grows with every release: MAJOR*10000 + MINOR*100 + PATCH. */
#define LB_VERSION_NUMBER (LB_VERSION_MAJOR * 10000 + LB_VERSION_MINOR * 100 + LB_VERSION_PATCH)

#include "lockbridge/error.h"
#include "lockbridge/core.h"
#include "lockbridge/legacy.h"
#include "lockbridge/modern.h"
#include "lockbridge/watchdog.h"
#include "lockbridge/migrate.h"
#include "lockbridge/cluster.h"
#include "lockbridge/sentinel.h"
#include "lockbridge/waiter.h"
#include "lockbridge/async.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The version of the library actually linked, as LB_VERSION_STRING. */
const char *lb_version(void);
#ifdef __cplusplus
}
#endif
#endif
