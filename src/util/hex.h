/* hex.h: one hexadecimal digit's value. */
#pragma once

/* 0-15 for [0-9a-fA-F], -1 for anything else. */
static inline int
hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
