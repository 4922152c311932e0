package main

// The host's side of credentials: where they are kept, and how they get
// there. The model never handles a secret: the user connects an account
// through the host (here the /connect command; in a real app an OAuth
// redirect), the host saves the token in the store, and tools read it
// through tool.ExecContextFrom(ctx).Credentials.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/pgstore"
)

// EnvCredentialsKey holds the AES-256 key that encrypts credentials on
// PostgreSQL or in the SQLite file: 32 random bytes in base64. For the
// SQLite file it may be unset: a key file beside the database holds it.
const EnvCredentialsKey = "VALET_CREDENTIALS_KEY"

// credentialsKeyID is the id stored beside every row encrypted with the key
// of EnvCredentialsKey. Rotating keys means a second id; see
// credentials.KeyRing.
const credentialsKeyID = "k1"

// postgresCredentials returns the credential store on db, encrypting with
// ring, and creates its table if need be. openStorage opens db.
func postgresCredentials(ctx context.Context, db *pgxpool.Pool, ring *credentials.KeyRing) (credentials.Store, error) {
	s, err := pgstore.New(db, pgstore.Config{KeyRing: ring})
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("-postgres: creating the credentials table: %w", err)
	}
	return s, nil
}

// keyRingFromEnv reads the key of EnvCredentialsKey. Its errors never hold
// the key.
func keyRingFromEnv() (*credentials.KeyRing, error) {
	v := strings.TrimSpace(os.Getenv(EnvCredentialsKey))
	if v == "" {
		return nil, fmt.Errorf("-postgres keeps credentials encrypted and needs a key in %s (32 random bytes in base64): %s", EnvCredentialsKey, keyHowTo)
	}
	return parseKey(v, EnvCredentialsKey)
}

const keyHowTo = "make one with `openssl rand -base64 32`, keep it outside the database (without it the saved credentials cannot be read), and set it: " +
	"export " + EnvCredentialsKey + "=\"$(openssl rand -base64 32)\""

// parseKey reads a key in base64 from source (the variable or file that
// held it) into a ring. Its errors never hold the key.
func parseKey(v, source string) (*credentials.KeyRing, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return nil, fmt.Errorf("%s is not valid base64; %s", source, keyHowTo)
	}
	if len(key) != credentials.KeySize {
		return nil, fmt.Errorf("%s decodes to %d bytes, want %d; %s", source, len(key), credentials.KeySize, keyHowTo)
	}
	ring, err := credentials.NewKeyRing(credentialsKeyID, map[string][]byte{credentialsKeyID: key})
	clear(key)
	return ring, err
}

// keyFileSuffix names the key file kept beside an SQLite file when
// EnvCredentialsKey is unset: valet.db's key is valet.db.key.
const keyFileSuffix = ".key"

// keyCreatedNote follows the key file's path when keyRingForFile created
// it.
const keyCreatedNote = " (created now; keep it, or the saved credentials cannot be read)"

// keyPath is the key file of the SQLite file at dbPath.
func keyPath(dbPath string) string { return dbPath + keyFileSuffix }

// keyRingForFile returns the ring that encrypts the credentials of the
// SQLite file at dbPath, and where its key came from: EnvCredentialsKey
// when it is set; otherwise the key file beside the database (dbPath +
// keyFileSuffix), created on first use with 32 random bytes and mode 0600.
// The key is never written into the database file. A key file that others
// may read is refused, as ssh refuses such a private key.
func keyRingForFile(dbPath string) (ring *credentials.KeyRing, from string, err error) {
	if v := strings.TrimSpace(os.Getenv(EnvCredentialsKey)); v != "" {
		ring, err := parseKey(v, EnvCredentialsKey)
		return ring, EnvCredentialsKey, err
	}
	path := keyPath(dbPath)
	raw, err := os.ReadFile(path)
	for try := 0; errors.Is(err, fs.ErrNotExist) && try < 3; try++ {
		if target, lerr := os.Readlink(path); lerr == nil {
			// A link to nothing: no key is made at its target, which
			// may be a secrets mount not there yet.
			return nil, "", fmt.Errorf("the credentials key file %s is a link to %s, which does not exist: restore it, or remove the link to have a new key made", path, target)
		}
		text, cerr := createKeyFile(path)
		if cerr == nil {
			ring, err := parseKey(text, path)
			return ring, path + keyCreatedNote, err
		}
		if !errors.Is(cerr, fs.ErrExist) {
			return nil, "", cerr
		}
		// Another first run made it meanwhile, whole: use its key.
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading the credentials key file: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, "", fmt.Errorf("the credentials key file %s may be read by other users (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	ring, err = parseKey(string(raw), path)
	return ring, path, err
}

// createKeyFile makes the key file at path with 32 random bytes in
// base64, mode 0600, and returns its text; an error wrapping fs.ErrExist
// when path exists. The key is written to a temporary file beside it,
// then linked to path, which fails if path exists: another first run
// starting at the same time never sees the file half-written, nor makes a
// second key.
func createKeyFile(path string) (string, error) {
	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	text := base64.StdEncoding.EncodeToString(key) + "\n"
	clear(key)
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*") // mode 0600
	if err != nil {
		return "", fmt.Errorf("creating the credentials key file: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(text)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing the credentials key file %s: %w", path, err)
	}
	if err := os.Link(f.Name(), path); err != nil {
		return "", fmt.Errorf("creating the credentials key file: %w", err)
	}
	return text, nil
}

// hostCommand runs the commands the host answers itself, which never reach
// the model:
//
//	/connect SERVICE TOKEN   saves {"access_token": TOKEN} for the tenant
//	/disconnect SERVICE      deletes it
//
// It reports whether text was a command. The token is never printed.
func hostCommand(ctx context.Context, w io.Writer, store credentials.Store, tenantID, text string) (bool, error) {
	if !strings.HasPrefix(text, "/") {
		return false, nil
	}
	f := strings.Fields(text)
	switch {
	case f[0] == "/connect" && len(f) == 3:
		if err := store.Save(ctx, tenantID, f[1], "", map[string]string{"access_token": f[2]}); err != nil {
			return true, err // names the tenant and service, never the token
		}
		fmt.Fprintln(w, "connected", f[1])
	case f[0] == "/disconnect" && len(f) == 2:
		if err := store.Delete(ctx, tenantID, f[1], ""); err != nil {
			return true, err
		}
		fmt.Fprintln(w, "disconnected", f[1])
	default:
		fmt.Fprintln(w, "commands: /connect SERVICE TOKEN (e.g. /connect google <token>), /disconnect SERVICE, exit")
	}
	return true, nil
}

// redactCommand returns text to echo: a /connect command with its token
// masked, anything else as it is.
func redactCommand(text string) string {
	f := strings.Fields(text)
	if len(f) >= 3 && f[0] == "/connect" {
		return "/connect " + f[1] + " ********"
	}
	return text
}
