/* The waiter's header under its 0.1 name, kept for programs written against
 * 0.1 until 1.0: it declares nothing of its own (see lockbridge/waiter.h). */
#ifndef LOCKBRIDGE_WAIT_H
#define LOCKBRIDGE_WAIT_H

#include "lockbridge/waiter.h"

#endif
