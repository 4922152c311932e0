//go:build !unix

package sqlitetrigger

import "context"

// lockFile takes no lock where flock(2) is not available (Windows): there
// the host must run one dispatching engine per file, as the package
// documentation says.
func lockFile(string) (func(), error) { return func() {}, nil }

// lockFileWait takes no lock where flock(2) is not available: run Migrate
// from one process at a time there.
func lockFileWait(context.Context, string) (func(), error) { return func() {}, nil }
