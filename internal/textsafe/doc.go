// Package textsafe keeps untrusted text from forging lines in the blocks
// valet builds from it: recalled facts, compaction transcripts and
// summaries, approval listings, event data and the output of an earlier
// task run. It is for valet's own packages only.
//
// A block is read line by line, by a model, by a person in a terminal or
// a chat app, and by code that indents or quotes it. Each of them may end
// a line at a different character, so text that is meant to stay on its
// line must not carry any of them:
//
//   - the line breaks of Unicode (UAX #14's mandatory breaks) and of
//     terminals: LF, VT (U+000B), FF (U+000C), CR, NEL (U+0085), LS
//     (U+2028) and PS (U+2029), with CR LF counting as one break;
//   - the other C0 and C1 control characters and DEL: a terminal honours
//     backspace, escape sequences (ESC, CSI U+009B) and the like, which
//     move the cursor and can rewrite a line already shown;
//   - the bidirectional embedding, override and isolate controls
//     (U+202A–U+202E, U+2066–U+2069), which make a terminal or a browser
//     show text in another order than it is read.
//
// [Line] puts text on one line: each break becomes a space. [Lines] keeps
// the text's lines but writes every break as "\n", so a step that splits
// on "\n" (to indent or quote each line) sees every line there is. Both
// replace the other control characters with U+FFFD, drop the
// bidirectional controls, keep tabs and return valid UTF-8 (each invalid
// byte becomes U+FFFD). [EscapeJSON] writes the same characters, found
// inside the strings of JSON text, as \u escapes instead, so the value
// encoded is unchanged and compact JSON stays on one line.
//
// Neither function escapes a block's own delimiters (angle brackets, say):
// that stays with the code that knows the block.
package textsafe
