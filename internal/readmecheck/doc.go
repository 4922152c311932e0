// Package readmecheck holds no code: its test compiles every Go snippet
// of the repository's README.md, so that the README shows only what
// builds. A snippet is a fragment; the test wraps each in a function of
// its own, beside declarations of the names snippets use without
// declaring them (ctx, client, pool, ...), and builds it with the module's
// packages. A local variable a snippet declares and does not use is not
// an error here, as it would not be in the program the snippet is cut
// from.
package readmecheck
