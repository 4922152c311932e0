package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/credentials"
)

// TestFileKeySymlinked: the key file may be a symlink to where the key is
// kept (a secrets mount). A link to a key with mode 0600 is used; a link
// whose target is readable by others is refused like such a file; a link
// whose target is missing (the mount not there yet) is refused naming the
// link and its target — not "file exists" — and no key is created at the
// target, nor a database.
func TestFileKeySymlinked(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvCredentialsKey, "")
	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	text := base64.StdEncoding.EncodeToString(key) + "\n"
	for name, tt := range map[string]struct {
		target string
		mode   os.FileMode // 0: the target does not exist
		want   string      // "": the run succeeds
	}{
		"to a private key":      {"private.key", 0o600, ""},
		"to a key others read":  {"shared.key", 0o644, "may be read by other users"},
		"to a missing key file": {"mount/missing.key", 0, "missing.key"},
	} {
		target := filepath.Join(dir, tt.target)
		if tt.mode != 0 {
			if err := os.WriteFile(target, []byte(text), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, tt.mode); err != nil {
				t.Fatal(err)
			}
		}
		db := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
		if err := os.Symlink(target, db+keyFileSuffix); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := run(context.Background(), &out, options{Offline: true, Interactive: true, In: strings.NewReader("hi\n"), DB: db})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "file exists")):
			t.Errorf("%s: %v, want an error naming %q", name, err, tt.want)
		}
		if strings.Contains(out.String(), strings.TrimSpace(text)) || (err != nil && strings.Contains(err.Error(), strings.TrimSpace(text))) {
			t.Errorf("%s: the key was printed", name)
		}
		if tt.mode == 0 {
			if _, err := os.Lstat(target); !os.IsNotExist(err) {
				t.Errorf("%s: a key was created at the link's target: %v", name, err)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("%s: the database was created: %v", name, err)
			}
		}
	}
}
