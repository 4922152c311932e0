// Package importcheck holds no code: its test checks that every Go file of
// the module groups its imports the same way — the standard library first,
// then other modules, then valet's own packages, each in a group of its own
// separated by a blank line (what goimports -local
// github.com/valetkit/valet writes).
package importcheck
