/* Synchronous calls of the module's scripts for the functions that are not
 * step machines (mode, census, inspect): EVALSHA, then EVAL on NOSCRIPT. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "migrate/internal.h"

redisReply *lb__eval(redisContext *c, const lb_script *s, int argc, const char **argv,
                     const size_t *lens) {
    const char *v[LB_CMD_MAX_ARGS];
    size_t l[LB_CMD_MAX_ARGS];
    if (argc + 2 > LB_CMD_MAX_ARGS) return NULL;
    v[0] = "EVALSHA";
    v[1] = s->sha1;
    for (int i = 0; i < argc; i++) {
        v[i + 2] = argv[i];
        l[i + 2] = lens[i];
    }
    l[0] = 7;
    l[1] = strlen(s->sha1);
    redisReply *r = redisCommandArgv(c, argc + 2, v, l);
    if (r && r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(r);
        v[0] = "EVAL";
        l[0] = 4;
        v[1] = s->body;
        l[1] = strlen(s->body);
        r = redisCommandArgv(c, argc + 2, v, l);
    }
    return r;
}
