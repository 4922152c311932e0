package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/credentials"
)

// envRunMain makes the test binary run main() instead of the tests: the
// child process of TestFileRemembers, started as `go run
// ./examples/assistant` would start the program.
const envRunMain = "VALET_ASSISTANT_RUN_MAIN"

// runMain runs the program in a child process with args, stdin and the
// environment env (on top of this process's, with VALET_CREDENTIALS_KEY
// removed unless env sets it), and returns what it printed.
func runMain(t *testing.T, stdin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvCredentialsKey+"=") && !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "ANTHROPIC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envRunMain+"=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the program %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// fileBytes returns the database and its WAL, as a thief of the directory
// would read them.
func fileBytes(t *testing.T, path string) []byte {
	var all []byte
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestFileRemembers: `go run ./examples/assistant -i` twice, as two
// processes with nothing but the default file between them: the second
// run knows the first's conversation, the fact it learned and the account
// it connected. The key is created beside the file (mode 0600), never
// inside it, and the token is stored encrypted.
func TestFileRemembers(t *testing.T) {
	home := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + home, "HOME=" + home}
	const token = "tok-sqlite-file-91ad"

	got := runMain(t, "what's the weather in Rome\nMy dentist is Dr. Kim.\n/connect google "+token+"\nexit\n", env, "-i", "-offline")
	path := filepath.Join(home, "valet-assistant", "assistant.db")
	keyPath := path + keyFileSuffix
	for _, want := range []string{
		"history and memory: SQLite file " + path + "\n",
		"waiting tools and approvals: SQLite file " + path + "\n",
		"credentials: SQLite file " + path + `, encrypted with key "k1" from ` + keyPath + " (created now;",
		"bot> Rome: sunny 25°C today.",
		"bot> Noted: your dentist is Dr. Kim.",
		"connected google",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("first run lacks %q:\n%s", want, got)
		}
	}
	st, err := os.Stat(keyPath)
	if err != nil {
		t.Fatalf("no key file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	keyText, _ := os.ReadFile(keyPath)
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(keyText)))
	if err != nil || len(key) != credentials.KeySize {
		t.Fatalf("key file holds %d bytes, %v", len(key), err)
	}
	stored := fileBytes(t, path)
	if !bytes.Contains(stored, []byte("Dr. Kim")) {
		t.Fatal("the history is not in the file") // the check below would prove nothing
	}
	for what, secret := range map[string][]byte{"token": []byte(token), "key": key, "key text": bytes.TrimSpace(keyText)} {
		if bytes.Contains(stored, secret) {
			t.Errorf("the database holds the %s", what)
		}
	}
	if strings.Contains(got, token) || strings.Contains(got, strings.TrimSpace(string(keyText))) {
		t.Error("the first run printed the token or the key")
	}

	got = runMain(t, "Who is my dentist?\nWhat did I say first?\nwhat's on my calendar today\n", env, "-i", "-offline")
	for _, want := range []string{
		`encrypted with key "k1" from ` + keyPath + "\n", // read, not created again
		"you> Who is my dentist?\nbot> Your dentist is Dr. Kim.\n",
		"you> What did I say first?\nbot> The first message of yours I have in this conversation is: “what's the weather in Rome”",
		"you> what's on my calendar today\n  → calendar_today {}",
		"bot> 3 meetings today:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("second run lacks %q:\n%s", want, got)
		}
	}
}

// TestFileKey: with VALET_CREDENTIALS_KEY set, -db FILE uses it and
// writes no key file; a key file others may read is refused; a key file
// that is not a key is refused without printing it; -db and -postgres
// together are refused.
func TestFileKey(t *testing.T) {
	dir := t.TempDir()
	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	t.Setenv(EnvCredentialsKey, base64.StdEncoding.EncodeToString(key))
	path := filepath.Join(dir, "my.db")
	got := chatOnce(t, "/connect google tok-env\n", options{Offline: true, DB: path})
	if !strings.Contains(got, `encrypted with key "k1" from VALET_CREDENTIALS_KEY`) || !strings.Contains(got, "connected google") {
		t.Errorf("with the variable set:\n%s", got)
	}
	if _, err := os.Stat(path + keyFileSuffix); !os.IsNotExist(err) {
		t.Errorf("a key file was written beside the database though the variable is set: %v", err)
	}

	t.Setenv(EnvCredentialsKey, "")
	for name, tt := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"readable by others": {base64.StdEncoding.EncodeToString(key), 0o644, "may be read by other users"},
		"not a key":          {"hunter2-not-a-key", 0o600, "is not valid base64"},
		"short key":          {base64.StdEncoding.EncodeToString(key[:16]), 0o600, "decodes to 16 bytes, want 32"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
		if err := os.WriteFile(p+keyFileSuffix, []byte(tt.content), tt.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p+keyFileSuffix, tt.mode); err != nil { // past the umask
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := run(context.Background(), &out, options{Offline: true, Interactive: true, In: strings.NewReader("hi\n"), DB: p})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", name, err, tt.want)
		} else if strings.Contains(err.Error(), tt.content) || strings.Contains(out.String(), tt.content) {
			t.Errorf("%s: the key file's content was printed", name)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: the database was created before the key was read: %v", name, err)
		}
	}

	var out bytes.Buffer
	if err := run(context.Background(), &out, options{Offline: true, DB: path, Postgres: "postgres://x"}); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Errorf("-db and -postgres together: %v", err)
	}
}

// TestFileNotADatabase: -db naming a file that is not a database stops
// the program, saying so, before anything is written beside or into it.
func TestFileNotADatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	notes := bytes.Repeat([]byte("my notes, not a database\n"), 200)
	if err := os.WriteFile(path, notes, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvCredentialsKey, "")
	var out bytes.Buffer
	err := run(context.Background(), &out, options{Offline: true, Interactive: true, In: strings.NewReader("hi\n"), DB: path})
	if err == nil || !strings.Contains(err.Error(), "not an SQLite database") || !strings.Contains(err.Error(), "-db "+path) {
		t.Errorf("run on a text file: %v\n%s", err, out.String())
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, notes) {
		t.Error("the file was changed")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files were created beside it: %d entries", len(entries))
	}
}

// TestFileMemoryOnly: -db :memory: chats without remembering, and writes
// no file, not even a key.
func TestFileMemoryOnly(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv(EnvCredentialsKey, "")
	got := chatOnce(t, "My dentist is Dr. Kim.\n", options{Offline: true, DB: memoryDB})
	if !strings.Contains(got, "history and memory: in memory") {
		t.Errorf("-db :memory: does not say it keeps things in memory:\n%s", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("-db :memory: wrote %d files", len(entries))
	}
}
