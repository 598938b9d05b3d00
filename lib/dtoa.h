/*
 * dtoa.h - shortest round-trip decimal digits of a double (Ryu, Ulf Adams,
 * PLDI 2018), as Go's strconv.FormatFloat(v, 'g'/'e'/'f', -1, 64) picks them.
 *
 * No allocation, no locale, no global state; callable from any thread.
 */
#ifndef MIRADB_LIB_DTOA_H
#define MIRADB_LIB_DTOA_H

/*
 * The fewest significant digits that read back (round-to-nearest-even) as
 * the finite |v| > 0 (subnormals included), and of those the decimal closest
 * to v; an exact tie between two such decimals goes to the even last digit.
 * Writes the digits '1'..'9' / '0' into |digits| (no NUL, no trailing zero)
 * and |*dp|, the decimal point position: v ~= 0.d1d2..dn x 10^dp. Returns n,
 * 1..17. Behaviour for zero, negative, NaN or infinite v is undefined.
 */
int dtoa_shortest(double v, char digits[17], int *dp);

#endif
