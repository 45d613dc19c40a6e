#include "kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sq_kv_add(char **text, size_t *len, size_t max, sq_err *e, const char *key,
              const char *fmt, va_list ap)
{
    if (!*key || strpbrk(key, "=\n\r"))
        return sq_fail(e, SQ_EX_SOFTWARE, "bad key '%s' for a key=value line", key);
    char val[4096];
    vsnprintf(val, sizeof val, fmt, ap);
    for (char *p = val; *p; p++) /* one line per key, whatever the value */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    /* a text whose last line lacks its newline gets one: the new key must
     * never merge into that line */
    int nl = *len && (*text)[*len - 1] != '\n';
    size_t add = (size_t)nl + strlen(key) + 1 + strlen(val) + 1;
    if (*len + add > max)
        return sq_fail(e, SQ_EX_SOFTWARE, "key=value text would exceed %zu bytes", max);
    char *t = realloc(*text, *len + add + 1);
    if (!t)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    snprintf(t + *len, add + 1, "%s%s=%s\n", nl ? "\n" : "", key, val);
    *text = t;
    *len += add;
    return 0;
}

int sq_kv_get(const char *text, const char *key, char *buf, size_t n)
{
    if (!text)
        return 0;
    size_t klen = strlen(key);
    const char *found = NULL;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        if ((size_t)(end - line) > klen && strncmp(line, key, klen) == 0 && line[klen] == '=')
            found = line + klen + 1;
        line = *end ? end + 1 : end;
    }
    if (!found)
        return 0;
    size_t len = strcspn(found, "\n");
    if (n) {
        if (len >= n)
            len = n - 1;
        memcpy(buf, found, len);
        buf[len] = '\0';
    }
    return 1;
}

static int kv_addf(char **text, size_t *len, size_t max, sq_err *e, const char *key,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sq_kv_add(text, len, max, e, key, fmt, ap);
    va_end(ap);
    return rc;
}

int sq_kv_put(char **text, size_t *len, size_t max, sq_err *e, const char *key,
              const char *value)
{
    return kv_addf(text, len, max, e, key, "%s", value);
}
