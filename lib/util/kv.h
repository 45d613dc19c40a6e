/* kv.h - "key=value\n" text, the form of stream meta and model configs.
 * One line per key; when a key appears twice the last line wins. */
#ifndef SQ_KV_H
#define SQ_KV_H

#include <stdarg.h>
#include <stddef.h>
#include "err.h"

/* Appends "key=value\n" to the malloc'd text *text of *len bytes (value
 * printf-formatted; newlines in it become spaces). The key must be
 * non-empty and hold no '=' or newline. Fails when the text would exceed
 * max bytes (70) or memory runs out (71). */
int sq_kv_add(char **text, size_t *len, size_t max, sq_err *e, const char *key,
              const char *fmt, va_list ap);
/* sq_kv_add of the plain string value. */
int sq_kv_put(char **text, size_t *len, size_t max, sq_err *e, const char *key,
              const char *value);
/* The value of the last "key=" line of text into buf; 1 if found. */
int sq_kv_get(const char *text, const char *key, char *buf, size_t n);

#endif
