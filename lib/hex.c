/*
 * hex.c - the digit tables of hex.h.
 */
#include "lib/hex.h"

const char hex_lower[16] = "0123456789abcdef";
const char hex_upper[16] = "0123456789ABCDEF";
