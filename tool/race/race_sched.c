/* `lockbridge race`: schedules in the catalogue's grammar and the catalogue's
 * files (a race, its schedule, per-locker variants and expected outcomes). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/race/race.h"

static int client_of(char c) {
    return c >= 'A' && c < 'A' + LB__RACE_MAX_CLIENTS ? c - 'A' : -1;
}

/* A decimal number of milliseconds, whole token: digits only (a sign for
 * skews), at most 10^9 (about eleven days). */
static int parse_ms(const char *s, int sign_ok, int64_t *out) {
    int64_t v;
    if (!*s || (!sign_ok && *s == '-')) return -1;
    if (lb__cli_parse_i64(s, strlen(s), &v) != 0) return -1;
    if (v > 1000000000 || v < -1000000000) return -1;
    *out = v;
    return 0;
}

/* A command name as the schedule may give it: letters, digits, '_' or "-". */
static int parse_cmd(const char *s, char *out, size_t cap) {
    size_t n = strlen(s);
    if (n == 0 || n >= cap) return -1;
    if (strcmp(s, "-") != 0)
        for (size_t i = 0; i < n; i++) {
            char c = s[i];
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '_'))
                return -1;
        }
    memcpy(out, s, n + 1);
    return 0;
}

/* "3.1T": a multiple of the validity, at most three decimals, more than 0
 * and at most 1000 times; kept in thousandths so that no rounding of a
 * binary fraction decides a pause's length. */
static int parse_scale(const char *s, int64_t *per_mille) {
    int64_t whole = 0, frac = 0;
    int digits = 0, decimals = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        if (digits >= 4) return -1;
        whole = whole * 10 + (*s - '0');
    }
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++) {
            if (++decimals > 3) return -1;
            frac = frac * 10 + (*s - '0');
        }
    if (digits == 0 || (decimals == 0 && s[-1] == '.') || strcmp(s, "T") != 0) return -1;
    while (decimals++ < 3) frac *= 10;
    *per_mille = whole * 1000 + frac;
    return *per_mille > 0 && *per_mille <= 1000000 ? 0 : -1;
}

static int parse_token(const char *t, lb__race_tok *k) {
    memset(k, 0, sizeof *k);
    if (t[0] == '+') {
        k->kind = LB__RACE_PAUSE;
        size_t n = strlen(t);
        if (n > 1 && t[n - 1] == 'T') return parse_scale(t + 1, &k->per_mille_t);
        return parse_ms(t + 1, 0, &k->ms);
    }
    k->client = client_of(t[0]);
    if (k->client < 0) return -1;
    switch (t[1]) {
    case '\0': k->kind = LB__RACE_STEP; return 0;
    case ':': k->kind = LB__RACE_STEP; return parse_cmd(t + 2, k->cmd, sizeof k->cmd);
    case '!': k->kind = LB__RACE_CRASH; return t[2] ? -1 : 0;
    case '?': k->kind = LB__RACE_LIVE; return t[2] ? -1 : 0;
    case '.': k->kind = LB__RACE_FINISH; return t[2] ? -1 : 0;
    case '~': k->kind = LB__RACE_SKEW; return parse_ms(t + 2, 1, &k->ms);
    default: return -1;
    }
}

int lb__race_parse(const char *text, lb__race_sched *out, char *why, size_t cap) {
    char buf[LB__RACE_SCHED_MAX], shown[80];
    memset(out, 0, sizeof *out);
    if (strlen(text) >= sizeof buf) {
        snprintf(why, cap, "schedule longer than %d bytes", LB__RACE_SCHED_MAX - 1);
        return -1;
    }
    strcpy(buf, text);
    char *save = NULL;
    for (char *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (out->n >= LB__RACE_MAX_TOKENS) {
            snprintf(why, cap, "more than %d tokens", LB__RACE_MAX_TOKENS);
            return -1;
        }
        lb__race_tok *k = &out->tok[out->n];
        if (parse_token(t, k) != 0) {
            lb__escape(shown, sizeof shown, t, strlen(t));
            snprintf(why, cap, "bad token \"%s\"", shown);
            return -1;
        }
        if (k->kind != LB__RACE_PAUSE && k->client + 1 > out->clients) out->clients = k->client + 1;
        if (k->per_mille_t) out->scaled = 1;
        out->n++;
    }
    if (out->n == 0) {
        snprintf(why, cap, "empty schedule");
        return -1;
    }
    return 0;
}

/* ---- Catalogue files ------------------------------------------------------------- */

/* "L1=caught:deleted": one expectation. */
static int parse_expect(lb__race_row *row, const char *item) {
    const char *eq = strchr(item, '=');
    if (!eq || eq == item || (size_t)(eq - item) >= sizeof row->expect[0].locker) return -1;
    if (row->nexpect >= LB__RACE_MAX_EXPECT) return -1;
    int i = row->nexpect;
    memcpy(row->expect[i].locker, item, (size_t)(eq - item));
    row->expect[i].locker[eq - item] = '\0';
    const char *v = eq + 1;
    row->expect[i].kind[0] = '\0';
    if (strcmp(v, "pass") == 0) row->expect[i].expect = LB__RACE_EXPECT_PASS;
    else if (strcmp(v, "n/a") == 0) row->expect[i].expect = LB__RACE_EXPECT_NA;
    else if (strcmp(v, "caught") == 0) row->expect[i].expect = LB__RACE_EXPECT_CAUGHT;
    else if (strncmp(v, "caught:", 7) == 0 && strlen(v + 7) > 0 &&
             strlen(v + 7) < sizeof row->expect[i].kind) {
        row->expect[i].expect = LB__RACE_EXPECT_CAUGHT;
        strcpy(row->expect[i].kind, v + 7);
    } else
        return -1;
    row->nexpect++;
    return 0;
}

static int header_line(lb__race_row *row, char *line) {
    if (strncmp(line, "# race:", 7) == 0) {
        const char *t = line + 7;
        while (*t == ' ') t++;
        size_t n = strlen(t) < sizeof row->title ? strlen(t) : sizeof row->title - 1;
        memcpy(row->title, t, n);
        row->title[n] = '\0';
        return 0;
    }
    if (strncmp(line, "# expect ", 9) != 0) return 0; /* a comment */
    char *save = NULL;
    for (char *t = strtok_r(line + 9, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
        if (parse_expect(row, t) != 0) return -1;
    return 0;
}

/* A schedule line is never cut short: a shorter schedule is another one. */
static int copy_schedule(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

/* "[L1] A:SETNX ...": a schedule for one locker. */
static int variant_line(lb__race_row *row, const char *line, int lineno) {
    const char *close = strchr(line, ']');
    size_t n = close ? (size_t)(close - line - 1) : 0;
    if (!close || n == 0 || n >= sizeof row->variant[0].locker) return -1;
    if (row->nvariants >= LB__RACE_MAX_VARIANTS) return -1;
    int i = row->nvariants++;
    row->variant[i].line = lineno;
    memcpy(row->variant[i].locker, line + 1, n);
    row->variant[i].locker[n] = '\0';
    const char *s = close + 1;
    while (*s == ' ') s++;
    return copy_schedule(row->variant[i].schedule, sizeof row->variant[i].schedule, s);
}

static int row_line(lb__race_row *row, char *line, int lineno, int *schedules) {
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = '\0';
    if (n == 0) return 0;
    if (line[0] == '#') return header_line(row, line);
    if (line[0] == '[') return variant_line(row, line, lineno);
    if (++*schedules > 1) return -1;
    row->line = lineno;
    return copy_schedule(row->schedule, sizeof row->schedule, line);
}

static void row_name(lb__race_row *row, const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(row->name, sizeof row->name, "%s", base);
    size_t n = strlen(row->name);
    if (n > 5 && strcmp(row->name + n - 5, ".race") == 0) row->name[n - 5] = '\0';
}

int lb__race_row_read(const char *path, lb__race_row *row, char *why, size_t cap) {
    memset(row, 0, sizeof *row);
    row_name(row, path);
    snprintf(row->path, sizeof row->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[LB__RACE_SCHED_MAX + 64];
    int lineno = 0, schedules = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (lineno > 200 || (strlen(line) == sizeof line - 1 && line[sizeof line - 2] != '\n')) {
            snprintf(why, cap, "%s:%d: line too long or file too long", path, lineno);
            rc = -1;
        } else if (row_line(row, line, lineno, &schedules) != 0) {
            snprintf(why, cap, "%s:%d: not a schedule, \"[LOCKER] schedule\", \"# race:\" or "
                     "\"# expect NAME=pass|caught|caught:KIND|n/a\" line (one schedule only)",
                     path, lineno);
            rc = -1;
        }
    }
    fclose(f);
    if (rc == 0 && schedules == 0) {
        snprintf(why, cap, "%s: no schedule line", path);
        rc = -1;
    }
    return rc;
}

const char *lb__race_row_schedule(const lb__race_row *row, const char *locker) {
    for (int i = 0; locker && i < row->nvariants; i++)
        if (strcmp(row->variant[i].locker, locker) == 0) return row->variant[i].schedule;
    return row->schedule;
}

void lb__race_row_where(const lb__race_row *row, const char *locker, char *out, size_t cap) {
    int line = row->line;
    for (int i = 0; locker && i < row->nvariants; i++)
        if (strcmp(row->variant[i].locker, locker) == 0) line = row->variant[i].line;
    if (row->path[0]) snprintf(out, cap, "%s:%d", row->path, line);
    else snprintf(out, cap, "%s", row->name);
}

/* The locker's own expectation, else the row's default ("*"), else pass. */
lb__race_expect lb__race_row_expect(const lb__race_row *row, const char *locker,
                                    const char **kind) {
    const char *names[2] = {locker, "*"};
    *kind = "";
    for (int n = 0; n < 2; n++)
        for (int i = 0; names[n] && i < row->nexpect; i++)
            if (strcmp(row->expect[i].locker, names[n]) == 0) {
                *kind = row->expect[i].kind;
                return row->expect[i].expect;
            }
    return LB__RACE_EXPECT_PASS;
}
