/* lockbridge-bench: tables, one layout printed on the terminal, as markdown for
 * docs/benchmarks.md and as long-form CSV. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

void table_init(table *t, const char *id, const char *const *cols) {
    memset(t, 0, sizeof *t);
    t->id = id;
    while (t->ncols < TABLE_COLS && cols[t->ncols]) {
        t->col[t->ncols] = cols[t->ncols];
        t->ncols++;
    }
}

void table_title(table *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->title, sizeof t->title, fmt, ap);
    va_end(ap);
}

int table_row(table *t) { return t->nrows < TABLE_ROWS ? t->nrows++ : -1; }

void cell(table *t, int row, int col, const char *fmt, ...) {
    if (row < 0 || row >= t->nrows || col < 0 || col >= t->ncols) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->cell[row][col], CELL_CAP, fmt, ap);
    va_end(ap);
}

void table_print(const table *t, FILE *f) {
    size_t w[TABLE_COLS];
    for (int c = 0; c < t->ncols; c++) {
        w[c] = strlen(t->col[c]);
        for (int r = 0; r < t->nrows; r++)
            if (strlen(t->cell[r][c]) > w[c]) w[c] = strlen(t->cell[r][c]);
    }
    fprintf(f, "\n%s\n", t->title);
    for (int c = 0; c < t->ncols; c++) fprintf(f, "%s%-*s", c ? "  " : "", (int)w[c], t->col[c]);
    fputc('\n', f);
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++)
            fprintf(f, c ? "  %*s" : "%-*s", (int)w[c], t->cell[r][c]);
        fputc('\n', f);
    }
}

/* A column whose every cell reads as a number (or "-") is right-aligned. */
static int numeric_column(const table *t, int col) {
    for (int r = 0; r < t->nrows; r++) {
        char *end;
        if (strcmp(t->cell[r][col], "-") == 0) continue;
        strtod(t->cell[r][col], &end);
        if (end == t->cell[r][col] || *end) return 0;
    }
    return 1;
}

void table_markdown(const table *t, FILE *f) {
    fprintf(f, "### %s\n\n|", t->title);
    for (int c = 0; c < t->ncols; c++) fprintf(f, " %s |", t->col[c]);
    fputs("\n|", f);
    for (int c = 0; c < t->ncols; c++) fputs(numeric_column(t, c) ? " ---: |" : " --- |", f);
    fputc('\n', f);
    for (int r = 0; r < t->nrows; r++) {
        fputc('|', f);
        for (int c = 0; c < t->ncols; c++) fprintf(f, " %s |", t->cell[r][c]);
        fputc('\n', f);
    }
    fputc('\n', f);
}

static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The row is named by its first `key_cols` cells joined by " / " (a strategy
 * and its client count name a contended row). */
void table_csv(const table *t, FILE *f) {
    int keys = t->key_cols > 1 ? t->key_cols : 1;
    for (int r = 0; r < t->nrows; r++)
        for (int c = keys; c < t->ncols; c++) {
            char name[TABLE_COLS * CELL_CAP];
            size_t o = 0;
            for (int k = 0; k < keys; k++)
                o += (size_t)snprintf(name + o, sizeof name - o, "%s%s", k ? " / " : "",
                                      t->cell[r][k]);
            csv_field(f, t->id);
            fputc(',', f);
            csv_field(f, name);
            fputc(',', f);
            csv_field(f, t->col[c]);
            fputc(',', f);
            csv_field(f, t->cell[r][c]);
            fputc('\n', f);
        }
}
