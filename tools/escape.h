/* escape.h: text from ZooKeeper (node data, node names) made safe to print.
 *
 * Whoever may create a lock node chooses its data, and the utilities print
 * it: on a terminal, a newline in it would forge a row and an escape
 * sequence would reach the terminal; in JSON, bytes that are not UTF-8
 * would make the line invalid. Both functions take bytes, with their
 * length, and never fail on what the bytes are. test/fuzz_names.c checks
 * their promises. */
#ifndef ZKLOCK_TOOLS_ESCAPE_H
#define ZKLOCK_TOOLS_ESCAPE_H

#include <stddef.h>

#include <jansson.h>

/* For a terminal or a table: a NUL-terminated copy of data[0..len) that is
 * valid UTF-8 and holds no control character, in which
 *  - a byte that is not part of a valid UTF-8 sequence is written \xNN,
 *  - an ASCII control character (below 0x20, and 0x7f) is written \xNN,
 *  - a C1 control (U+0080 to U+009F), a line or paragraph separator and a
 *    bidirectional formatting character (which can reorder what a terminal
 *    shows around it) are written \uXXXX,
 *  - a backslash is written \\, so that an escape cannot be forged either.
 * If the result would be longer than max_chars characters (each escape
 * counts for its length), it is cut before a whole character or escape and
 * ends in "..." (max_chars characters at most in all); max_chars 0: no
 * limit, and max_chars below 3 counts as 3.
 * The caller frees the result; NULL if out of memory. */
char *tool_text_for_terminal(const void *data, size_t len, size_t max_chars);

/* For JSON: a new jansson string holding data[0..len) with every byte that
 * is not part of a valid UTF-8 sequence replaced by U+FFFD (jansson takes
 * only valid UTF-8). NUL bytes are kept (JSON writes them \u0000). The
 * caller owns the reference; NULL if out of memory. */
json_t *tool_text_for_json(const void *data, size_t len);

/* o as the utilities write JSON: one line, only printable ASCII (jansson
 * writes every other character as \uXXXX, but for DEL, which this writes
 * \u007f), so that no byte of node data reaches a terminal as it is. No
 * newline at the end. The caller frees it; NULL if out of memory. */
char *tool_json_line(const json_t *o);

#endif
