/* lb_strerror and lb_err_name, generated from the single list in error.h. */
#include "lockbridge/error.h"

const char *lb_strerror(int status) {
    switch (status) {
    case LB_OK: return "success";
#define LB_ERRNO_MSG_(name, value, msg) case LB_##name: return msg;
    LB_ERRNO_MAP(LB_ERRNO_MSG_)
#undef LB_ERRNO_MSG_
    default: return "unknown error";
    }
}

const char *lb_err_name(int status) {
    switch (status) {
    case LB_OK: return "LB_OK";
#define LB_ERRNO_NAME_(name, value, msg) case LB_##name: return "LB_" #name;
    LB_ERRNO_MAP(LB_ERRNO_NAME_)
#undef LB_ERRNO_NAME_
    default: return "LB_UNKNOWN";
    }
}
