package trigger

import (
	"fmt"

	"github.com/valetkit/valet/internal/ids"
)

// checkID accepts a non-empty string of valid UTF-8 without NUL, up to
// MaxIDLen bytes: the rule of every ID valet takes (tenant, conversation,
// task), the same as memory.CheckID's.
func checkID(what, s string) error {
	if ids.Valid(s) {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrInvalid, ids.Check(what, s))
}

// checkTask checks the tenant and task IDs an Engine method is given.
func checkTask(tenantID, id string) error {
	if err := checkID("tenant ID", tenantID); err != nil {
		return err
	}
	return checkID("task ID", id)
}
