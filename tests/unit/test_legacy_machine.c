/* The legacy step machines against scripted replies, no server: each case
 * gives the options, the sequence of (expected command, reply) per operation
 * and the outcome; plus foreign values, option checks and allocation failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/failing_alloc.h"
#include "legacy/internal.h"
#include "lockbridge/lockbridge.h"
#include "unit/lbt_fake.h"

/* The fake clock starts at epoch 1700000000.000000 s and monotonic 5000 s. */
#define T0_WALL_US 1700000000000000
#define T0_MONO_NS 5000000000000
/* With the default ttl (30 s) the ms codec writes this value at T0. */
#define V0 "1700000030001"
#define EXPIRED "1699999990000"
#define UNEXPIRED "1700000005000"

enum { OP_END = 0, OP_ACQUIRE, OP_RELEASE, OP_EXTEND };

/* One command the machine must emit and the reply it is then fed. In argv,
 * "@name" stands for the SHA1 of script legacy_<name> and "#name" for its body. */
typedef struct xchg {
    const char *argv[LB_CMD_MAX_ARGS];
    lbt_reply reply;
    int64_t advance_ms; /* the clock moves this much before the reply is fed */
} xchg;

#define MAX_XCHG 8
typedef struct phase {
    int op;
    int64_t ttl_ms;     /* OP_EXTEND */
    int64_t advance_ms; /* the clock moves this much before the operation */
    xchg x[MAX_XCHG];   /* ends at the first empty argv */
    int status;
    int held;
} phase;

typedef struct machine_case {
    const char *name;
    const char *codec; /* spec; NULL: "ms" */
    lb_legacy_variant variant;
    int nil_set, nil_retries; /* nil_retries applies when nil_set */
    phase p[4];               /* ends at OP_END */
    const char *value;        /* lb_legacy_value after the last phase */
    int has_observed;
    int64_t observed;         /* lb_legacy_observed_expiry after the last phase */
} machine_case;

/* Replies are brace lists: they are only ever the last macro argument. */
#define CMD(...) {__VA_ARGS__}
#define SETNX(v, reply) {{"SETNX", "k", v}, reply, 0}
#define GET(reply) {{"GET", "k"}, reply, 0}
#define GETSET(v, reply) {{"GETSET", "k", v}, reply, 0}
#define DEL(reply) {{"DEL", "k"}, reply, 0}
#define R_INT(n) LBT_R_INT(n)
#define R_STR(s) LBT_R_STR(s)
#define R_NIL LBT_R_NIL
#define R_ERR(s) LBT_R_ERR(s)
#define R_NONE LBT_R_NONE
#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

/* The first phase of every release and extend case: SETNX succeeds at T0. */
#define HOLD {OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(1))}, LB_OK, 1}

static const machine_case machine_cases[] = {
    /* ---- acquire, wire variant ---- */
    {"SETNX 1 acquires", .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(1))}, LB_OK, 1}},
     .value = V0},
    {"SETNX 0 then an unexpired GET is busy",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_STR(UNEXPIRED))}, LB_EBUSY, 0}},
     .value = "", .has_observed = 1, .observed = 1700000005000},
    {"a value expiring at this very millisecond is still held",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_STR("1700000000000"))}, LB_EBUSY, 0}},
     .value = "", .has_observed = 1, .observed = 1700000000000},
    {"nil GET retries SETNX",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_NIL), SETNX(V0, R_INT(1))}, LB_OK, 1}},
     .value = V0},
    {"nil GETs are bounded by nil_retries", .nil_set = 1, .nil_retries = 2,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_NIL), SETNX(V0, R_INT(0)), GET(R_NIL), SETNX(V0, R_INT(0)),
             GET(R_NIL)},
            LB_EBUSY, 0}},
     .value = ""},
    {"no nil retries: a nil GET is busy", .nil_set = 1, .nil_retries = 0,
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_NIL)}, LB_EBUSY, 0}}, .value = ""},
    {"an expired GET is taken over with GETSET",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_STR(EXPIRED))}, LB_OK, 1}},
     .value = V0},
    {"GETSET nil holds (the key was freed: our GETSET created it)",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_NIL)},
            LB_OK, 1}},
     .value = V0},
    {"GETSET returning another expired value holds",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_STR("1699999995000"))},
            LB_OK, 1}},
     .value = V0},
    {"GETSET returning an unexpired value is busy: a racer won the takeover",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_STR("1700000009000"))},
            LB_EBUSY, 0}},
     .value = "", .has_observed = 1, .observed = 1700000009000},
    {"GETSET returning a value outside the plausible window is foreign, not expired",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_STR("1700000600"))},
            LB_EFOREIGN, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    {"GETSET returning a foreign value is foreign",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_STR("{\"uid\":\"a1\"}"))},
            LB_EFOREIGN, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    /* ---- acquire, scripted takeover ---- */
    {"scripted takeover 1 holds", .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
             {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED, V0), R_INT(1), 0}},
            LB_OK, 1}},
     .value = V0},
    {"scripted takeover 2 (written into a freed key) holds", .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
             {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED, V0), R_INT(2), 0}},
            LB_OK, 1}},
     .value = V0},
    {"scripted takeover 0 (the value changed) is busy", .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
             {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED, V0), R_INT(0), 0}},
            LB_EBUSY, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    {"scripted takeover answering another integer is a protocol error",
     .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
             {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED, V0), R_INT(-1), 0}},
            LB_EPROTO, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    {"scripted takeover answering a string is a protocol error", .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
             {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED, V0), R_STR("1"), 0}},
            LB_EPROTO, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    {"scripted takeover after NOSCRIPT is re-sent with EVAL", .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
             {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED,
               V0), R_ERR("NOSCRIPT No matching script."), 0},
             {CMD("EVAL", "#takeover", "1", "k", EXPIRED, V0), R_INT(1), 0}},
            LB_OK, 1}},
     .value = V0},
    {"scripted takeover failing is a Redis error", .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
             {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED, V0), R_ERR("ERR Error running script"), 0}},
            LB_EREDIS, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    /* ---- error replies ---- */
    {"SETNX on a key of another type", .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_ERR(WRONGTYPE))},
                                              LB_EWRONGTYPE, 0}}, .value = ""},
    {"GET on a key of another type",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_ERR(WRONGTYPE))}, LB_EWRONGTYPE, 0}},
     .value = ""},
    {"GETSET on a key of another type",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_ERR(WRONGTYPE))},
            LB_EWRONGTYPE, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    {"SETNX failing is a Redis error",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_ERR("OOM command not allowed"))}, LB_EREDIS, 0}},
     .value = ""},
    {"GET failing is a Redis error",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_ERR("ERR"))}, LB_EREDIS, 0}},
     .value = ""},
    {"GETSET failing is a Redis error",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_ERR("READONLY replica"))},
            LB_EREDIS, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    /* ---- wrong reply types ---- */
    {"SETNX answering a string", .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_STR("1"))}, LB_EPROTO, 0}},
     .value = ""},
    {"SETNX answering 2", .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(2))}, LB_EPROTO, 0}},
     .value = ""},
    {"SETNX answering nil", .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_NIL)}, LB_EPROTO, 0}},
     .value = ""},
    {"GET answering an integer",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_INT(5))}, LB_EPROTO, 0}}, .value = ""},
    {"GET answering an array",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(LBT_R_ARRAY)}, LB_EPROTO, 0}},
     .value = ""},
    {"GET answering a status",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(LBT_R_STATUS("OK"))}, LB_EPROTO, 0}},
     .value = ""},
    {"GETSET answering an integer",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_INT(1))},
            LB_EPROTO, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    /* ---- transport failures ---- */
    {"no reply to SETNX", .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_NONE)}, LB_EIO, 0}}, .value = ""},
    {"no reply to GET", .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_NONE)}, LB_EIO, 0}},
     .value = ""},
    {"no reply to GETSET",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)), GETSET(V0, R_NONE)},
            LB_EIO, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    {"no reply to the takeover script", .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
             {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED, V0), R_NONE, 0}},
            LB_EIO, 0}},
     .value = "", .has_observed = 1, .observed = 1699999990000},
    {"acquiring a held handle is a state error, nothing sent",
     .p = {HOLD, {OP_ACQUIRE, 0, 0, {{{NULL}}}, LB_ESTATE, 1}}, .value = V0},
    /* ---- other codecs ---- */
    {"seconds: SETNX writes now + ttl + 1 s", .codec = "s",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX("1700000031", R_INT(1))}, LB_OK, 1}}, .value = "1700000031"},
    {"seconds: an expired value is taken over", .codec = "s",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX("1700000031", R_INT(0)), GET(R_STR("1699999999")),
             GETSET("1700000031", R_STR("1699999999"))},
            LB_OK, 1}},
     .value = "1700000031"},
    {"seconds: a value expiring this second is held", .codec = "s",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX("1700000031", R_INT(0)), GET(R_STR("1700000000"))},
            LB_EBUSY, 0}},
     .value = "", .has_observed = 1, .observed = 1700000000},
    {"float: SETNX writes microseconds", .codec = "float",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX("1700000030.000001", R_INT(1))}, LB_OK, 1}},
     .value = "1700000030.000001"},
    {"float: an expired value is taken over", .codec = "float",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX("1700000030.000001", R_INT(0)), GET(R_STR("1699999999.999999")),
             GETSET("1700000030.000001", R_STR("1699999999.999999"))},
            LB_OK, 1}},
     .value = "1700000030.000001"},
    {"float: a value without a fraction is read", .codec = "float",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX("1700000030.000001", R_INT(0)), GET(R_STR("1700000001"))},
            LB_EBUSY, 0}},
     .value = "", .has_observed = 1, .observed = 1700000001000000},
    {"json: SETNX writes monotonic nanoseconds", .codec = "json",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX("{\"expiryTime\":5030000000001}", R_INT(1))}, LB_OK, 1}},
     .value = "{\"expiryTime\":5030000000001}"},
    {"json: an expired value is taken over", .codec = "json",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX("{\"expiryTime\":5030000000001}", R_INT(0)),
             GET(R_STR("{\"expiryTime\":4999999999999}")),
             GETSET("{\"expiryTime\":5030000000001}", R_STR("{\"expiryTime\":4999999999999}"))},
            LB_OK, 1}},
     .value = "{\"expiryTime\":5030000000001}"},
    {"json: a token lock's value is foreign", .codec = "json",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX("{\"expiryTime\":5030000000001}", R_INT(0)),
             GET(R_STR("{\"uid\":\"0f8b6c1e-1c4f-4a51-9a7e-2b1d1f7a6c3e\"}"))},
            LB_EFOREIGN, 0}},
     .value = ""},
    {"json epoch ms: SETNX writes epoch milliseconds", .codec = "json:unit=ms,clock=epoch",
     .p = {{OP_ACQUIRE, 0, 0, {SETNX("{\"expiryTime\":1700000030001}", R_INT(1))}, LB_OK, 1}},
     .value = "{\"expiryTime\":1700000030001}"},
    {"json epoch ms: an unexpired value is busy", .codec = "json:unit=ms,clock=epoch",
     .p = {{OP_ACQUIRE, 0, 0,
            {SETNX("{\"expiryTime\":1700000030001}", R_INT(0)),
             GET(R_STR("{\"expiryTime\":1700000000001}"))},
            LB_EBUSY, 0}},
     .value = "", .has_observed = 1, .observed = 1700000000001},
    /* ---- release, wire variant ---- */
    {"wire release deletes our value",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_STR(V0)), DEL(R_INT(1))}, LB_OK, 0}}, .value = V0},
    {"wire release leaves another value alone",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_STR("1700000031000"))}, LB_ELOST, 0}}, .value = V0},
    {"wire release of a vanished key is lost",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_NIL)}, LB_ELOST, 0}}, .value = V0},
    {"wire release just outside the margin deletes",
     .p = {HOLD, {OP_RELEASE, 0, 28999, {GET(R_STR(V0)), DEL(R_INT(1))}, LB_OK, 0}},
     .value = V0},
    {"wire release inside the margin refuses to delete",
     .p = {HOLD, {OP_RELEASE, 0, 29001, {GET(R_STR(V0))}, LB_EEXPIRED, 0}}, .value = V0},
    {"wire release after expiry refuses to delete",
     .p = {HOLD, {OP_RELEASE, 0, 40000, {GET(R_STR(V0))}, LB_EEXPIRED, 0}}, .value = V0},
    {"the margin is judged when GET's reply arrives",
     .p = {HOLD, {OP_RELEASE, 0, 0, {{{"GET", "k"}, R_STR(V0), 29500}}, LB_EEXPIRED, 0}},
     .value = V0},
    {"wire release whose DEL finds nothing is lost",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_STR(V0)), DEL(R_INT(0))}, LB_ELOST, 0}}, .value = V0},
    {"wire release GET on a key of another type",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_ERR(WRONGTYPE))}, LB_EWRONGTYPE, 1}}, .value = V0},
    {"wire release GET answering an integer",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_INT(1))}, LB_EPROTO, 1}}, .value = V0},
    {"wire release DEL answering a string",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_STR(V0)), DEL(R_STR("1"))}, LB_EPROTO, 1}},
     .value = V0},
    {"wire release DEL failing",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_STR(V0)), DEL(R_ERR("ERR"))}, LB_EREDIS, 1}},
     .value = V0},
    {"no reply to the release GET keeps the handle held",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_NONE)}, LB_EIO, 1}}, .value = V0},
    {"no reply to the release DEL lets the lock go (it may have run)",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_STR(V0)), DEL(R_NONE)}, LB_EIO, 0}}, .value = V0},
    {"release when not held is a state error, nothing sent",
     .p = {{OP_RELEASE, 0, 0, {{{NULL}}}, LB_ESTATE, 0}}, .value = ""},
    {"a second release is a state error",
     .p = {HOLD, {OP_RELEASE, 0, 0, {GET(R_STR(V0)), DEL(R_INT(1))}, LB_OK, 0},
           {OP_RELEASE, 0, 0, {{{NULL}}}, LB_ESTATE, 0}},
     .value = V0},
    /* ---- release, scripted ---- */
    {"scripted release 1 deletes", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD, {OP_RELEASE, 0, 0, {{CMD("EVALSHA", "@release", "1", "k", V0), R_INT(1), 0}}, LB_OK, 0}},
     .value = V0},
    {"scripted release 0: the key was gone", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_RELEASE, 0, 0, {{CMD("EVALSHA", "@release", "1", "k", V0), R_INT(0), 0}}, LB_ELOST, 0}},
     .value = V0},
    {"scripted release -1: another value, left alone", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_RELEASE, 0, 0, {{CMD("EVALSHA", "@release", "1", "k", V0), R_INT(-1), 0}}, LB_ELOST, 0}},
     .value = V0},
    {"scripted release needs no margin", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_RELEASE, 0, 29900, {{CMD("EVALSHA", "@release", "1", "k", V0), R_INT(1), 0}}, LB_OK, 0}},
     .value = V0},
    {"scripted release answering a string", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_RELEASE, 0, 0, {{CMD("EVALSHA", "@release", "1", "k", V0), R_STR("1"), 0}}, LB_EPROTO, 1}},
     .value = V0},
    {"scripted release with no reply lets the lock go (it may have run)",
     .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD, {OP_RELEASE, 0, 0, {{CMD("EVALSHA", "@release", "1", "k", V0), R_NONE, 0}}, LB_EIO, 0}},
     .value = V0},
    /* ---- extend ---- */
    {"extend on the wire is refused, nothing sent",
     .p = {HOLD, {OP_EXTEND, 60000, 0, {{{NULL}}}, LB_EINVAL, 1}}, .value = V0},
    {"extend after expiry by our clock is refused, nothing sent", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD, {OP_EXTEND, 60000, 30002, {{{NULL}}}, LB_EEXPIRED, 0}}, .value = V0},
    /* Within the release margin (1 s) of expiry a contender whose clock is a
     * little ahead may already be taking it over: its GETSET would overwrite
     * the extended value, so the extend is refused and the lock left to lapse. */
    {"extend within the release margin of expiry is refused, nothing sent",
     .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD, {OP_EXTEND, 60000, 29500, {{{NULL}}}, LB_EEXPIRED, 0}}, .value = V0},
    {"extend at the expiry instant is refused, nothing sent", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD, {OP_EXTEND, 60000, 30001, {{{NULL}}}, LB_EEXPIRED, 0}}, .value = V0},
    {"extend just outside the margin runs", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_EXTEND, 60000, 29000,
            {{CMD("EVALSHA", "@extend", "1", "k", V0, "1700000089001"), R_INT(1), 0}}, LB_OK, 1}},
     .value = "1700000089001"},
    {"extend 1 writes the new expiry", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_EXTEND, 60000, 10000,
            {{CMD("EVALSHA", "@extend", "1", "k", V0, "1700000070001"), R_INT(1), 0}}, LB_OK, 1}},
     .value = "1700000070001"},
    {"extend twice compares with the extended value", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_EXTEND, 60000, 10000,
            {{CMD("EVALSHA", "@extend", "1", "k", V0, "1700000070001"), R_INT(1), 0}}, LB_OK, 1},
           {OP_RELEASE, 0, 0, {{CMD("EVALSHA", "@release", "1", "k", "1700000070001"), R_INT(1), 0}},
            LB_OK, 0}},
     .value = "1700000070001"},
    {"extend 0: the key was gone", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_EXTEND, 60000, 0, {{CMD("EVALSHA", "@extend", "1", "k", V0, "1700000060001"), R_INT(0), 0}},
            LB_ELOST, 0}},
     .value = V0},
    {"extend -1: another value, left alone", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_EXTEND, 60000, 0,
            {{CMD("EVALSHA", "@extend", "1", "k", V0, "1700000060001"), R_INT(-1), 0}}, LB_ELOST, 0}},
     .value = V0},
    {"extend with no reply keeps the old value", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD,
           {OP_EXTEND, 60000, 0, {{CMD("EVALSHA", "@extend", "1", "k", V0, "1700000060001"), R_NONE, 0}},
            LB_EIO, 1}},
     .value = V0},
    {"extend by 0 ms is refused", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD, {OP_EXTEND, 0, 0, {{{NULL}}}, LB_EINVAL, 1}}, .value = V0},
    {"extend by a negative ttl is refused", .variant = LB_LEGACY_SCRIPTED,
     .p = {HOLD, {OP_EXTEND, -5, 0, {{{NULL}}}, LB_EINVAL, 1}}, .value = V0},
    {"extend when not held is a state error", .variant = LB_LEGACY_SCRIPTED,
     .p = {{OP_EXTEND, 1000, 0, {{{NULL}}}, LB_ESTATE, 0}}, .value = ""},
};

static const lb_script *script_named(const char *name) {
    if (strcmp(name, "takeover") == 0) return &lb__script_legacy_takeover;
    if (strcmp(name, "release") == 0) return &lb__script_legacy_release;
    if (strcmp(name, "extend") == 0) return &lb__script_legacy_extend;
    fail_msg("no script %s", name);
    return NULL;
}

static void assert_command(const lb_cmd *cmd, const char *const *argv) {
    int argc = 0;
    while (argc < LB_CMD_MAX_ARGS && argv[argc]) argc++;
    assert_int_equal(cmd->argc, argc);
    for (int i = 0; i < argc; i++) {
        const char *want = argv[i];
        if (want[0] == '@') want = script_named(want + 1)->sha1;
        else if (want[0] == '#') want = script_named(want + 1)->body;
        if (cmd->argvlen[i] != strlen(want) || memcmp(cmd->argv[i], want, strlen(want)) != 0)
            fail_msg("argument %d: got \"%.*s\", want \"%s\"", i, (int)cmd->argvlen[i],
                     cmd->argv[i], want);
    }
}

static lb_machine *start(lb_legacy_lock *l, const phase *p) {
    switch (p->op) {
    case OP_ACQUIRE: return lb_legacy_machine(l, LB_OP_TRY_ACQUIRE, 0);
    case OP_RELEASE: return lb_legacy_machine(l, LB_OP_RELEASE, 0);
    default: return lb_legacy_machine(l, LB_OP_EXTEND, p->ttl_ms);
    }
}

/* Runs one phase: every command is checked before its reply is fed, and no
 * command beyond the listed ones may be emitted. */
static void run_phase(lb_legacy_lock *l, const phase *p, lbt_fake_time *ft, const lb_clock *clk) {
    lbt_fake_advance(ft, p->advance_ms);
    lb_machine *m = start(l, p);
    assert_non_null(m);
    lb_now now = lb_clock_now(clk);
    int rc = lb_machine_step(m, NULL, &now);
    unsigned n = 0;
    for (; n < MAX_XCHG && p->x[n].argv[0]; n++) {
        if (rc != LB_STEP_SEND) fail_msg("ended with %s before command %u", lb_err_name(rc), n);
        assert_command(lb_machine_command(m), p->x[n].argv);
        lbt_fake_advance(ft, p->x[n].advance_ms);
        now = lb_clock_now(clk);
        redisReply r;
        rc = lb_machine_step(m, lbt_reply_build(&r, &p->x[n].reply), &now);
    }
    if (rc == LB_STEP_SEND) {
        const lb_cmd *cmd = lb_machine_command(m);
        fail_msg("unexpected further command %.*s", (int)cmd->argvlen[0], cmd->argv[0]);
    }
    if (rc != p->status) fail_msg("got %s, want %s", lb_err_name(rc), lb_err_name(p->status));
    assert_int_equal(lb_legacy_info_of(l).held, p->held);
    assert_int_equal(lb_machine_commands(m), n);
    if (rc != LB_OK) assert_string_not_equal(lb_machine_errstr(m), "");
    /* A finished operation takes no more replies. */
    assert_int_equal(lb_machine_step(m, NULL, &now), LB_ESTATE);
}

static void run_case(const machine_case *c) {
    lbt_fake_time ft = {T0_WALL_US, T0_MONO_NS};
    lb_clock clk = lbt_fake_clock(&ft, 0);
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    assert_int_equal(lb_codec_parse(&o.codec, c->codec ? c->codec : "ms"), LB_OK);
    o.variant = c->variant;
    if (c->nil_set) o.nil_retries = c->nil_retries;
    o.clock = &clk;
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, "k", 1, &o), LB_OK);
    for (size_t i = 0; i < 4 && c->p[i].op != OP_END; i++) run_phase(l, &c->p[i], &ft, &clk);
    size_t len = lb_legacy_info_of(l).value_len;
    assert_string_equal(lb_legacy_info_of(l).value, c->value);
    assert_int_equal(len, strlen(c->value));
    int64_t t = -1;
    assert_int_equal(lb_legacy_info_of(l).observed, c->has_observed);
    t = lb_legacy_info_of(l).observed_expiry;
    assert_int_equal(t, c->has_observed ? c->observed : 0);
    lb_legacy_lock_free(l);
}

static void test_legacy_machines_follow_the_protocol_exactly(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof machine_cases / sizeof machine_cases[0]; i++) {
        print_message("case: %s\n", machine_cases[i].name);
        run_case(&machine_cases[i]);
    }
}

/* ---- Foreign values at GET: reported, never written over or deleted ---------------- */
static void test_foreign_values_end_the_attempt_without_a_write(void **state) {
    (void)state;
    static const struct {
        const char *codec, *value;
        size_t len;
    } cases[] = {
        {"ms", "", 0},
        {"ms", "abc", 0},
        {"ms", "-5", 0},
        {"ms", "+5", 0},
        {"ms", "01700000000000", 0},
        {"ms", "1700000000000.5", 0},
        {"ms", "1e3", 0},
        {"ms", "17\0" "00", 5},
        {"ms", "{\"expiryTime\":1}", 0},
        {"ms", "5f2b8c0d9e1a4b3c8d7e6f5a4b3c2d1e", 0},
        {"s", "1700000000.5", 0},
        {"float", "1700000000.", 0},
        {"json", "{\"uid\":\"0f8b6c1e-1c4f-4a51-9a7e-2b1d1f7a6c3e\"}", 0},
        {"json", "1700000000000", 0},
        {"json", "{\"expiryTime\":1,\"expiryTime\":2}", 0},
        {"ms", NULL, 1 << 20}, /* a megabyte of digits */
        /* Values of another codec that decode in this one, outside the
         * plausible window: R's live seconds read as ms (1970), L1's ms read
         * as seconds (year ~55,800), epoch ns read as a monotonic instant. */
        {"ms", "1700000600", 0},
        {"s", "1700000030001", 0},
        {"float", "1700000030001", 0},
        {"json", "{\"expiryTime\":1700000030000000001}", 0},
        {"json:unit=ms,clock=epoch", "{\"expiryTime\":1700000600}", 0},
    };
    char *big = malloc(1 << 20);
    assert_non_null(big);
    memset(big, '7', 1 << 20);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        assert_int_equal(lb_codec_parse(&o.codec, cases[i].codec), LB_OK);
        lbt_fake_time ft = {T0_WALL_US, T0_MONO_NS};
        lb_clock clk = lbt_fake_clock(&ft, 0);
        o.clock = &clk;
        lb_legacy_lock *l = NULL;
        assert_int_equal(lb_legacy_lock_new(&l, "k", 1, &o), LB_OK);
        lb_machine *m = lb_legacy_machine(l, LB_OP_TRY_ACQUIRE, 0);
        lb_now now = lb_clock_now(&clk);
        lbt_reply zero = LBT_R_INT(0);
        lbt_reply value = {LBT_STR, 0, cases[i].value ? cases[i].value : big, cases[i].len};
        redisReply r;
        print_message("foreign %s value %zu\n", cases[i].codec, i);
        assert_int_equal(lb_machine_step(m, NULL, &now), LB_STEP_SEND);
        assert_int_equal(lb_machine_step(m, lbt_reply_build(&r, &zero), &now), LB_STEP_SEND);
        assert_string_equal(lb_machine_command(m)->argv[0], "GET");
        assert_int_equal(lb_machine_step(m, lbt_reply_build(&r, &value), &now), LB_EFOREIGN);
        assert_int_equal(lb_machine_commands(m), 2);
        assert_false(lb_legacy_info_of(l).held);
        assert_false(lb_legacy_info_of(l).observed);
        /* The value is reported escaped: printable, bounded, no NUL inside. */
        const char *shown = lb_legacy_info_of(l).foreign;
        for (const char *p = shown; *p; p++) assert_true(*p >= 0x20 && *p < 0x7f);
        assert_true(strlen(shown) < 96);
        assert_non_null(strstr(lb_machine_errstr(m), "not in this client's format"));
        lb_legacy_lock_free(l);
    }
    free(big);
}

/* A value outside the window is reported with its reading and the codec that
 * reads it plausibly, so the operator can tell a codec mismatch from garbage. */
static void test_an_implausible_value_names_the_codec_that_reads_it(void **state) {
    (void)state;
    static const struct {
        const char *codec, *value, *says;
    } cases[] = {
        {"ms", "1700000600", "(s reads it plausibly)"},
        {"s", "1700000030001", "(ms reads it plausibly)"},
        {"ms", "1700000030000000", "(no codec reads it plausibly)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        assert_int_equal(lb_codec_parse(&o.codec, cases[i].codec), LB_OK);
        lbt_fake_time ft = {T0_WALL_US, T0_MONO_NS};
        lb_clock clk = lbt_fake_clock(&ft, 0);
        o.clock = &clk;
        lb_legacy_lock *l = NULL;
        assert_int_equal(lb_legacy_lock_new(&l, "k", 1, &o), LB_OK);
        lb_machine *m = lb_legacy_machine(l, LB_OP_TRY_ACQUIRE, 0);
        lb_now now = lb_clock_now(&clk);
        lbt_reply zero = LBT_R_INT(0), value = LBT_R_STR(cases[i].value);
        redisReply r;
        assert_int_equal(lb_machine_step(m, NULL, &now), LB_STEP_SEND);
        assert_int_equal(lb_machine_step(m, lbt_reply_build(&r, &zero), &now), LB_STEP_SEND);
        assert_int_equal(lb_machine_step(m, lbt_reply_build(&r, &value), &now), LB_EFOREIGN);
        if (!strstr(lb_machine_errstr(m), cases[i].says) ||
            !strstr(lb_machine_errstr(m), "outside the plausible window"))
            fail_msg("%s %s: %s", cases[i].codec, cases[i].value, lb_machine_errstr(m));
        lb_legacy_lock_free(l);
    }
}

/* A validity so long that the expiry written would be implausible is refused
 * before anything is sent. */
static void test_a_ttl_beyond_the_window_fails_without_sending(void **state) {
    (void)state;
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.ttl_ms = LB_PLAUSIBLE_AHEAD_MS;
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, "k", 1, &o), LB_OK);
    lb_machine *m = lb_legacy_machine(l, LB_OP_TRY_ACQUIRE, 0);
    lb_now now = {T0_WALL_US, T0_MONO_NS};
    assert_int_equal(lb_machine_step(m, NULL, &now), LB_EINVAL);
    assert_int_equal(lb_machine_commands(m), 0);
    lb_legacy_lock_free(l);
}

/* ---- Options ------------------------------------------------------------------------ */
static void test_lock_creation_rejects_bad_options(void **state) {
    (void)state;
    enum { TTL, NIL, MARGIN, BMIN, BMAX, VARIANT, KIND, UNIT, CLOCK, FIELD, UNTERMINATED, N_BAD };
    for (int bad = 0; bad < N_BAD; bad++) {
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        o.codec.kind = LB_CODEC_JSON;
        switch (bad) {
        case TTL: o.ttl_ms = 0; break;
        case NIL: o.nil_retries = -1; break;
        case MARGIN: o.release_margin_ms = -1; break;
        case BMIN: o.backoff_min_ms = 0; break;
        case BMAX: o.backoff_max_ms = o.backoff_min_ms - 1; break;
        case VARIANT: o.variant = (lb_legacy_variant)5; break;
        case KIND: o.codec.kind = (lb_codec_kind)9; break;
        case UNIT: o.codec.unit = (lb_unit)9; break;
        case CLOCK: o.codec.clock = (lb_clock_kind)2; break;
        case FIELD: strcpy(o.codec.field, "a\"b"); break;
        case UNTERMINATED: memset(o.codec.field, 'f', sizeof o.codec.field); break;
        }
        lb_legacy_lock *l = (lb_legacy_lock *)&o; /* must be reset to NULL */
        print_message("bad option %d\n", bad);
        assert_int_equal(lb_legacy_lock_new(&l, "k", 1, &o), LB_EINVAL);
        assert_null(l);
    }
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, NULL, 1, NULL), LB_EINVAL);
    assert_int_equal(lb_legacy_lock_new(&l, "k", 0, NULL), LB_EINVAL);
    assert_int_equal(lb_legacy_lock_new(NULL, "k", 1, NULL), LB_EINVAL);
    /* NULL options mean the defaults; keys are any bytes. */
    assert_int_equal(lb_legacy_lock_new(&l, "a\0b", 3, NULL), LB_OK);
    lb_machine *m = lb_legacy_machine(l, LB_OP_TRY_ACQUIRE, 0);
    lb_now now = lb_clock_now(NULL);
    assert_int_equal(lb_machine_step(m, NULL, &now), LB_STEP_SEND);
    assert_int_equal(lb_machine_command(m)->argvlen[1], 3);
    assert_memory_equal(lb_machine_command(m)->argv[1], "a\0b", 3);
    lb_legacy_lock_free(l);
}

static void test_a_ttl_too_large_to_encode_fails_without_sending(void **state) {
    (void)state;
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.ttl_ms = INT64_MAX;
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, "k", 1, &o), LB_OK);
    lb_machine *m = lb_legacy_machine(l, LB_OP_TRY_ACQUIRE, 0);
    lb_now now = {T0_WALL_US, T0_MONO_NS};
    assert_int_equal(lb_machine_step(m, NULL, &now), LB_EINVAL);
    assert_int_equal(lb_machine_commands(m), 0);
    assert_false(lb_legacy_info_of(l).held);
    lb_legacy_lock_free(l);
}

/* ---- Allocation failure --------------------------------------------------------------- */
/* A full cycle on scripted replies: acquire by takeover, extend, release. */
static void cycle(lb_legacy_lock *l, lbt_fake_time *ft, const lb_clock *clk) {
    static const phase acquire = {OP_ACQUIRE, 0, 0,
                                  {SETNX(V0, R_INT(0)), GET(R_STR(EXPIRED)),
                                   {CMD("EVALSHA", "@takeover", "1", "k", EXPIRED, V0), R_INT(1), 0}},
                                  LB_OK, 1};
    static const phase extend = {OP_EXTEND, 60000, 0,
                                 {{CMD("EVALSHA", "@extend", "1", "k", V0, "1700000060001"), R_INT(1), 0}},
                                 LB_OK, 1};
    static const phase release = {OP_RELEASE, 0, 0,
                                  {{CMD("EVALSHA", "@release", "1", "k", "1700000060001"), R_INT(1), 0}},
                                  LB_OK, 0};
    run_phase(l, &acquire, ft, clk);
    run_phase(l, &extend, ft, clk);
    run_phase(l, &release, ft, clk);
}

static void test_every_allocation_failure_is_enomem_and_leaks_nothing(void **state) {
    (void)state;
    int failures = 0;
    for (int n = 1; n < 100; n++) {
        lbt_failing_alloc a;
        lb_allocator alloc = lbt_failing_allocator(&a, n);
        lbt_fake_time ft = {T0_WALL_US, T0_MONO_NS};
        lb_clock clk = lbt_fake_clock(&ft, 0);
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        o.variant = LB_LEGACY_SCRIPTED;
        o.allocator = &alloc;
        o.clock = &clk;
        lb_legacy_lock *l = NULL;
        int rc = lb_legacy_lock_new(&l, "k", 1, &o);
        if (rc != LB_OK) {
            assert_int_equal(rc, LB_ENOMEM);
            assert_null(l);
            assert_int_equal(a.live, 0);
            failures++;
            continue;
        }
        /* Creation allocated everything the handle needs: nothing else may. */
        int calls = a.calls;
        cycle(l, &ft, &clk);
        assert_int_equal(a.calls, calls);
        lb_legacy_lock_free(l);
        assert_int_equal(a.live, 0);
        break;
    }
    assert_true(failures >= 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legacy_machines_follow_the_protocol_exactly),
        cmocka_unit_test(test_foreign_values_end_the_attempt_without_a_write),
        cmocka_unit_test(test_an_implausible_value_names_the_codec_that_reads_it),
        cmocka_unit_test(test_a_ttl_beyond_the_window_fails_without_sending),
        cmocka_unit_test(test_lock_creation_rejects_bad_options),
        cmocka_unit_test(test_a_ttl_too_large_to_encode_fails_without_sending),
        cmocka_unit_test(test_every_allocation_failure_is_enomem_and_leaks_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
