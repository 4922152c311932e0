package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileWithLostKeyRefused: the key file beside a database that holds
// credentials is lost (or another key is set in the variable). The program
// must stop at start, saying the file's credentials were encrypted with
// another key, rather than make a new key file, carry on and fail at each
// tool that needs a credential; the key file it would have made is not
// left behind, so putting the old one back works; no secret is printed.
func TestFileWithLostKeyRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "my.db")
	t.Setenv(EnvCredentialsKey, "")
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{Offline: true, Interactive: true, In: strings.NewReader("/connect google tok-secret-9\n"), DB: path}); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(path + keyFileSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + keyFileSuffix); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(context.Background(), &out, options{Offline: true, Interactive: true, In: strings.NewReader("hi\n"), DB: path})
	if err == nil || !strings.Contains(err.Error(), "another key") {
		t.Fatalf("a new key beside a file whose credentials another key encrypted: %v; want a refusal naming another key\n%s", err, out.String())
	}
	for _, s := range []string{"tok-secret-9", strings.TrimSpace(string(saved))} {
		if strings.Contains(err.Error(), s) || strings.Contains(out.String(), s) {
			t.Errorf("a secret was printed: %v\n%s", err, out.String())
		}
	}
	if _, err := os.Stat(path + keyFileSuffix); !os.IsNotExist(err) {
		t.Errorf("the refused run left a new key file behind: %v", err)
	}
	// The old key put back opens the file and its credential.
	if err := os.WriteFile(path+keyFileSuffix, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), &out, options{Offline: true, Interactive: true, In: strings.NewReader("what's on my calendar today?\n"), DB: path}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "failed") {
		t.Errorf("with the old key back, the calendar still fails:\n%s", out.String())
	}
	// Another key in the variable is refused the same way.
	t.Setenv(EnvCredentialsKey, "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=")
	err = run(context.Background(), &out, options{Offline: true, Interactive: true, In: strings.NewReader("hi\n"), DB: path})
	if err == nil || !strings.Contains(err.Error(), "another key") || strings.Contains(err.Error(), "AQEBAQEB") {
		t.Errorf("another key in %s: %v", EnvCredentialsKey, err)
	}
}
