/* units.h: parse limits as people write them. Pure: no syscalls, no globals. */
#pragma once

#include <stdint.h>

/* "512M", "2G", "1.5GiB", "100k", "4096" (bytes). Binary multiples (K = 1024).
 * Returns 0, or -EINVAL (nonsense, negative, empty) / -ERANGE (overflow). */
int units_parse_size(const char *s, uint64_t *ret_bytes);

/* "90s", "1.5m", "500ms", "2h", "60" (seconds). Returns 0 or -EINVAL/-ERANGE. */
int units_parse_duration_ms(const char *s, uint64_t *ret_ms);

/* "1.5", "2", "0.25" cores -> milli-cores (1500). Returns 0 or -EINVAL/-ERANGE. */
int units_parse_cpus_milli(const char *s, uint64_t *ret_milli);

/* A plain non-negative integer count ("256", "16k" allowed, decimal multiples K = 1000).
 * Returns 0 or -EINVAL/-ERANGE. */
int units_parse_count(const char *s, uint64_t *ret);

/* Formats bytes compactly ("512M", "1G", "1536K", "123") into buf. Returns buf. */
char *units_format_size(uint64_t bytes, char *buf, unsigned size);
