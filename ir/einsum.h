/* Einsum equations (ONNX Einsum): the term parser the interpreter and the GPU lowering share.
 * Labels are ids 0..25 for 'a'..'z', 26..51 for 'A'..'Z'; the ellipsis is -2. */
#ifndef DRK_EINSUM_H
#define DRK_EINSUM_H

#include <stdbool.h>

/* The id of a label character, -1 if ch is not a letter. */
int drk_einsum_label_id(char ch);

/* Parses the term [s, e) (spaces ignored) into labels; *has_ell: it has an ellipsis. Returns the
 * label count, or -1 for a bad term (another character, a second ellipsis, more than max). */
int drk_einsum_parse_term(const char *s, const char *e, int *labels, int max, bool *has_ell);

#endif
