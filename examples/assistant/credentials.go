package main

// The host's side of credentials: where they are kept, and how they get
// there. The model never handles a secret: the user connects an account
// through the host (here the /connect command; in a real app an OAuth
// redirect), the host saves the token in the store, and tools read it
// through tool.ExecContextFrom(ctx).Credentials.

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/pgstore"
)

// EnvCredentialsKey holds the AES-256 key that encrypts credentials on
// PostgreSQL: 32 random bytes in base64.
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
	const howTo = "make one with `openssl rand -base64 32`, keep it outside the database (without it the saved credentials cannot be read), and set it: " +
		"export " + EnvCredentialsKey + "=\"$(openssl rand -base64 32)\""
	v := strings.TrimSpace(os.Getenv(EnvCredentialsKey))
	if v == "" {
		return nil, fmt.Errorf("-postgres keeps credentials encrypted and needs a key in %s (32 random bytes in base64): %s", EnvCredentialsKey, howTo)
	}
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid base64; %s", EnvCredentialsKey, howTo)
	}
	if len(key) != credentials.KeySize {
		return nil, fmt.Errorf("%s decodes to %d bytes, want %d; %s", EnvCredentialsKey, len(key), credentials.KeySize, howTo)
	}
	ring, err := credentials.NewKeyRing(credentialsKeyID, map[string][]byte{credentialsKeyID: key})
	clear(key)
	return ring, err
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
