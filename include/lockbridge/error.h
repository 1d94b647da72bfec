/* lockbridge error codes: one list generates the enum, lb_strerror and lb_err_name. */
#ifndef LOCKBRIDGE_ERROR_H
#define LOCKBRIDGE_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message). Values are stable across releases: never renumber.
 * LB_EEXPIRED is no failure of the call: the lock was deliberately left to
 * lapse with its expiry (a wire release near expiry, say), and no other
 * client's lock was touched. LB_ECANCELED: a blocking acquire ended by
 * lb_clock.sleep_ms (core.h). */
#define LB_ERRNO_MAP(X)                                                              \
    X(EINVAL, -1, "invalid argument")                                               \
    X(ENOMEM, -2, "out of memory")                                                  \
    X(EBUSY, -3, "lock is held by another client")                                  \
    X(ETIMEDOUT, -4, "lock could not be acquired before the deadline")              \
    X(ELOST, -5, "lock is no longer ours")                                          \
    X(EFOREIGN, -6, "value at the key is not in this client's format")              \
    X(EWRONGTYPE, -7, "key holds a value of another Redis type")                    \
    X(EREDIS, -8, "Redis answered with an error")                                   \
    X(EIO, -9, "connection or I/O error")                                           \
    X(EPROTO, -10, "unexpected reply from Redis")                                   \
    X(EEXPIRED, -11, "left to expire on purpose: by this client's clock it has "     \
                     "expired or is too close to expiry to touch safely")            \
    X(ESTATE, -12, "operation not valid in the lock's current state")              \
    X(ECANCELED, -13, "wait cancelled by the clock's sleep hook")

typedef enum lb_errno {
    LB_OK = 0,
#define LB_ERRNO_ENUM_(name, value, msg) LB_##name = (value),
    LB_ERRNO_MAP(LB_ERRNO_ENUM_)
#undef LB_ERRNO_ENUM_
} lb_errno;

/* Human-readable message for a status code; never NULL. */
const char *lb_strerror(int status);
/* Symbolic name ("LB_EBUSY"); never NULL ("LB_UNKNOWN" for an unknown code). */
const char *lb_err_name(int status);

#ifdef __cplusplus
}
#endif
#endif
