/* clock.h: the one monotonic clock every agentbox process reads. */
#pragma once

#include <stdint.h>

/* Milliseconds / nanoseconds on CLOCK_MONOTONIC. */
int64_t now_ms(void);
int64_t now_ns(void);
