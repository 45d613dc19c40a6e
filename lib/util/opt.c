/* opt.c - option tables (opt.h). */
#include "opt.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kv.h"

const char *sq_opt_key(const sq_opt *o, char *buf, size_t n)
{
    if (o->key)
        return o->key;
    snprintf(buf, n, "%s", o->name);
    for (char *p = buf; *p; p++)
        if (*p == '-')
            *p = '_';
    return buf;
}

const char *sq_opt_name_of_key(const char *key, char *buf, size_t n)
{
    /* a namespace ("train.", "blin.") is not part of the name */
    const char *dot = strchr(key, '.');
    snprintf(buf, n, "%s", dot ? dot + 1 : key);
    for (char *p = buf; *p; p++)
        if (*p == '_')
            *p = '-';
    return buf;
}

const sq_opt *sq_opt_find(const sq_opt *t, const char *name)
{
    for (; t && t->type; t++)
        if (t->name && strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

static int *int_at(const sq_opt *o, void *obj) { return (int *)(void *)((char *)obj + o->offset); }
static double *real_at(const sq_opt *o, void *obj)
{
    return (double *)(void *)((char *)obj + o->offset);
}

/* The index of word in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *word)
{
    size_t wl = strlen(word);
    int i = 0;
    for (const char *p = choices; p && *p; i++) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == wl && strncmp(p, word, l) == 0)
            return i;
        p += l + (bar ? 1 : 0);
    }
    return -1;
}

/* The i-th word of "a|b|c" into buf. */
static const char *choice_word(const char *choices, int i, char *buf, size_t n)
{
    const char *p = choices;
    for (; i > 0 && p; i--) {
        p = strchr(p, '|');
        p = p ? p + 1 : NULL;
    }
    if (!p)
        return "";
    const char *bar = strchr(p, '|');
    size_t l = bar ? (size_t)(bar - p) : strlen(p);
    snprintf(buf, n, "%.*s", (int)l, p);
    return buf;
}

void sq_opt_defaults(const sq_opt *t, void *obj)
{
    sq_err e = {0};
    for (; t->type; t++)
        if (t->def)
            sq_opt_set(t, obj, t->def, SQ_EX_SOFTWARE, NULL, &e);
        else if (t->type == SQ_OPT_REAL)
            *real_at(t, obj) = 0;
        else if (t->type == SQ_OPT_U64)
            memset((char *)obj + t->offset, 0, sizeof(uint64_t));
        else
            *int_at(t, obj) = 0;
}

/* The message of a bad value: the option or the key of a file. */
static int bad_value(const sq_opt *o, const char *value, int code, const char *src,
                     const char *why, sq_err *e)
{
    char kb[64];
    if (src)
        return sq_fail(e, code, "%s: bad %s=%s%s", src, sq_opt_key(o, kb, sizeof kb), value,
                       why);
    return sq_fail(e, code, "bad value '%s' for --%s%s", value, o->name, why);
}

/* SQ_OPT_SQUARE: "NxN" or "N" into *n, lo <= N <= hi; the reason of a
 * refusal into why. */
static int square_parse(const sq_opt *o, const char *value, int *n, char *why, size_t nw)
{
    const char *x = strchr(value, 'x');
    char side[32];
    int a, b;
    snprintf(why, nw, " (NxN or N, N an integer in %.0f..%.0f)", o->lo, o->hi);
    if (!x)
        return sq_cli_int(value, (int)o->lo, (int)o->hi, n);
    if ((size_t)(x - value) >= sizeof side)
        return -1;
    snprintf(side, sizeof side, "%.*s", (int)(x - value), value);
    if (sq_cli_int(side, INT32_MIN, INT32_MAX, &a) || sq_cli_int(x + 1, INT32_MIN, INT32_MAX, &b))
        return -1;
    if (a != b) {
        /* a product of two sub-key sets of the same size: no NxM */
        snprintf(why, nw, " (both sides must be equal: two sub-key sets of the same size)");
        return -1;
    }
    return sq_cli_int(side, (int)o->lo, (int)o->hi, n);
}

int sq_opt_set(const sq_opt *o, void *obj, const char *value, int code, const char *src,
               sq_err *e)
{
    char why[160] = "";
    switch (o->type) {
    case SQ_OPT_INT: {
        int v;
        if (sq_cli_int(value, (int)o->lo, (int)o->hi, &v)) {
            snprintf(why, sizeof why, " (an integer in %.0f..%.0f)", o->lo, o->hi);
            return bad_value(o, value, code, src, why, e);
        }
        *int_at(o, obj) = v;
        return 0;
    }
    case SQ_OPT_REAL: {
        double v = 0;
        int in = sq_cli_real(value, &v) == 0 && v >= o->lo && v <= o->hi &&
                 !(o->lo_open && v == o->lo) && !(o->hi_open && v == o->hi);
        if (!in) {
            snprintf(why, sizeof why, " (a number in %c%g, %g%c)", o->lo_open ? '(' : '[',
                     o->lo, o->hi, o->hi_open ? ')' : ']');
            return bad_value(o, value, code, src, why, e);
        }
        *real_at(o, obj) = v;
        return 0;
    }
    case SQ_OPT_CHOICE: {
        int i = choice_index(o->choices, value);
        if (i < 0) {
            snprintf(why, sizeof why, " (one of %s)", o->choices);
            return bad_value(o, value, code, src, why, e);
        }
        *int_at(o, obj) = i;
        return 0;
    }
    case SQ_OPT_ENUM: {
        int i = o->parse(value);
        if (i < 0) {
            if (o->expect)
                snprintf(why, sizeof why, " (%s)", o->expect);
            return bad_value(o, value, code, src, why, e);
        }
        *int_at(o, obj) = i;
        return 0;
    }
    case SQ_OPT_U64: {
        uint64_t v;
        if (sq_cli_u64(value, 0, UINT64_MAX, &v))
            return bad_value(o, value, code, src, " (an unsigned integer)", e);
        memcpy((char *)obj + o->offset, &v, sizeof v);
        return 0;
    }
    case SQ_OPT_SQUARE: {
        int v;
        if (square_parse(o, value, &v, why, sizeof why))
            return bad_value(o, value, code, src, why, e);
        *int_at(o, obj) = v;
        return 0;
    }
    case SQ_OPT_FLAG:
        if (strcmp(value, "0") && strcmp(value, "1"))
            return bad_value(o, value, code, src, " (0 or 1)", e);
        *int_at(o, obj) = value[0] == '1';
        return 0;
    }
    return sq_fail(e, SQ_EX_SOFTWARE, "option %s: bad type", o->name);
}

int sq_opt_check(const sq_opt *t, const void *obj, int code, sq_err *e)
{
    for (; t && t->type; t++) {
        char buf[64];
        const char *v = sq_opt_format(t, obj, buf, sizeof buf);
        if (!t->def && strcmp(v, "0") == 0)
            continue; /* unset: e.g. --threads, all */
        /* parse into a slot of its own: obj stays untouched */
        sq_opt one = *t;
        one.offset = 0;
        uint64_t slot[1];
        if (sq_opt_set(&one, slot, v, code, NULL, e))
            return e->code;
    }
    return 0;
}

int sq_opt_apply(const sq_opt *t, void *obj, const char *kv, int required, int code,
                 const char *src, sq_err *e)
{
    for (; t->type; t++) {
        char kb[64], val[256];
        const char *key = sq_opt_key(t, kb, sizeof kb);
        if (!kv || !sq_kv_get(kv, key, val, sizeof val)) {
            if (required && !t->cli_only && !t->optional)
                return sq_fail(e, code, "%s: config has no %s", src, key);
            continue;
        }
        if (sq_opt_set(t, obj, val, code, src, e))
            return e->code;
    }
    return 0;
}

const char *sq_opt_format(const sq_opt *o, const void *obj, char *buf, size_t n)
{
    void *p = (void *)(uintptr_t)obj;
    switch (o->type) {
    case SQ_OPT_REAL:
        snprintf(buf, n, "%.17g", *real_at(o, p));
        return buf;
    case SQ_OPT_CHOICE:
        return choice_word(o->choices, *int_at(o, p), buf, n);
    case SQ_OPT_ENUM: {
        if (o->format)
            return o->format(*int_at(o, p), buf, n);
        const char *w = o->word(*int_at(o, p));
        snprintf(buf, n, "%s", w ? w : "");
        return buf;
    }
    case SQ_OPT_U64: {
        uint64_t v;
        memcpy(&v, (const char *)obj + o->offset, sizeof v);
        snprintf(buf, n, "%" PRIu64, v);
        return buf;
    }
    case SQ_OPT_SQUARE:
        snprintf(buf, n, "%dx%d", *int_at(o, p), *int_at(o, p));
        return buf;
    default:
        snprintf(buf, n, "%d", *int_at(o, p));
        return buf;
    }
}

int sq_opt_write(const sq_opt *t, const void *obj, sq_opt_sink set, void *ctx, sq_err *e)
{
    for (; t->type; t++) {
        char kb[64], vb[64];
        if (t->cli_only)
            continue;
        if (set(ctx, sq_opt_key(t, kb, sizeof kb), sq_opt_format(t, obj, vb, sizeof vb), e))
            return e->code;
    }
    return 0;
}

void sq_opt_help(const sq_opt *t, FILE *f)
{
    for (; t->type; t++) {
        if (!t->name)
            continue;
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s", t->name, t->arg ? " " : "",
                 t->arg ? t->arg : "");
        const char *h = t->help ? t->help : "";
        const char *nl = strchr(h, '\n');
        int first = nl ? (int)(nl - h) : (int)strlen(h);
        if (strlen(head) > 19) {
            /* a head wider than its column gets a line of its own */
            fprintf(f, "  %s\n", head);
            fprintf(f, "  %-19s %.*s\n", "", first, h);
        } else {
            fprintf(f, "  %-19s %.*s\n", head, first, h);
        }
        while (nl) {
            h = nl + 1;
            nl = strchr(h, '\n');
            int l = nl ? (int)(nl - h) : (int)strlen(h);
            fprintf(f, "  %-19s %.*s\n", "", l, h);
        }
        if (t->more_help)
            t->more_help(f);
    }
}
