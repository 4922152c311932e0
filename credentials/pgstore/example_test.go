package pgstore_test

import (
	"context"
	"encoding/base64"
	"errors"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/pgstore"
)

// Wiring a store at start-up. Keys come from outside the database: here
// VALET_CREDENTIALS_KEY, 32 random bytes in base64 (openssl rand -base64 32).
// It needs a PostgreSQL, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	key, err := base64.StdEncoding.DecodeString(os.Getenv("VALET_CREDENTIALS_KEY"))
	if err != nil {
		log.Fatal("VALET_CREDENTIALS_KEY is not base64") // never log the key itself
	}
	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key})
	if err != nil {
		log.Fatal(err) // names the key id, never its bytes
	}
	store, err := pgstore.New(db, pgstore.Config{KeyRing: ring})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	err = store.Save(ctx, "alice", "google", "", map[string]string{"access_token": "ya29.a0", "refresh_token": "1//0g"})
	if err != nil {
		log.Fatal(err)
	}
	secret, err := store.Get(ctx, "alice", "google", "")
	if errors.Is(err, credentials.ErrNotFound) {
		log.Print("alice has not connected Google")
	}
	log.Print(secret) // REDACTED
}

// Rotating to a new key: every replica gets the ring with k2 as primary
// and k1 still in it; then one of them re-encrypts, and k1 can go.
func ExampleStore_Rotate() {
	ctx := context.Background()
	var db *pgxpool.Pool // configured elsewhere
	var oldKey, newKey []byte

	ring, err := credentials.NewKeyRing("k2", map[string][]byte{"k1": oldKey, "k2": newKey})
	if err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(db, pgstore.Config{KeyRing: ring})
	if err != nil {
		log.Fatal(err)
	}
	n, err := store.Rotate(ctx)
	if err != nil {
		log.Fatal(err) // names the rows and key ids it could not re-encrypt
	}
	log.Printf("re-encrypted %d credentials under k2", n)
}
