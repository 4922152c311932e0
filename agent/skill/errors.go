package skill

import (
	"errors"
	"strings"

	"github.com/valetkit/valet/internal/textsafe"
)

var (
	// ErrInvalid marks a SKILL.md that cannot be used as it is: no front
	// matter, broken YAML, a missing or malformed field, a file or body
	// over its size cap, text that is not UTF-8.
	ErrInvalid = errors.New("skill: invalid SKILL.md")
	// ErrDuplicate marks a skill name that two SKILL.md files share.
	ErrDuplicate = errors.New("skill: duplicate skill name")
	// ErrUnknownTool marks a tool a skill lists that [Set.Check] was told
	// does not exist.
	ErrUnknownTool = errors.New("skill: unknown tool")
	// ErrUnknownModel marks a model a skill names that [Set.Check] was
	// told does not exist.
	ErrUnknownModel = errors.New("skill: unknown model")
)

// Error is one problem with one SKILL.md. [Load] and [Set.Check] return
// every problem they find, joined with [errors.Join]; errors.As finds each
// Error and errors.Is its kind ([ErrInvalid], [ErrDuplicate],
// [ErrUnknownTool], [ErrUnknownModel]) or the cause (an fs or YAML error).
type Error struct {
	// Path is the SKILL.md's path in the fs.FS given to Load (for an
	// error reading the fs.FS, the directory that could not be read).
	Path string
	// Kind is the sentinel the problem is an instance of; nil for an
	// error reading the file.
	Kind error
	// Msg says what is wrong, in a form that quotes any text taken from
	// the file.
	Msg string
	// Cause is the underlying error (fs, YAML), if any.
	Cause error
}

// Error returns "skill: <path>: <what is wrong>[: <cause>]" on one line
// (a YAML error's lines are joined).
func (e *Error) Error() string {
	s := "skill: " + textsafe.Line(e.Path) + ": " + e.Msg
	if e.Cause != nil {
		s += ": " + strings.Join(strings.Fields(textsafe.Line(e.Cause.Error())), " ")
	}
	return s
}

// Unwrap returns the kind and the cause.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}
