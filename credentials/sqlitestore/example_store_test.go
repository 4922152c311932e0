package sqlitestore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/sqlitestore"
)

// Wiring a store on an SQLite file at start-up, saving a token and
// reading it back. The key would come from outside the file (an
// environment variable, a secret manager); here it is made on the spot.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "valet-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "valet.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // River's advice for SQLite

	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key})
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlitestore.New(db, sqlitestore.Config{KeyRing: ring})
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
	if err != nil {
		log.Fatal(err)
	}
	var token struct {
		AccessToken string `json:"access_token"`
	}
	if err := secret.Decode(&token); err != nil {
		log.Fatal(err)
	}
	fmt.Println(secret) // a Secret never prints its value
	fmt.Println(token.AccessToken)
	// Output:
	// REDACTED
	// ya29.a0
}

// Rotating to a new key: the ring gets k2 as primary with k1 still in
// it; Rotate re-encrypts, and k1 can go.
func ExampleStore_Rotate() {
	ctx := context.Background()
	var db *sql.DB // opened as in the package example
	var oldKey, newKey []byte

	ring, err := credentials.NewKeyRing("k2", map[string][]byte{"k1": oldKey, "k2": newKey})
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlitestore.New(db, sqlitestore.Config{KeyRing: ring})
	if err != nil {
		log.Fatal(err)
	}
	n, err := store.Rotate(ctx)
	if err != nil {
		log.Fatal(err) // names the rows and key ids it could not re-encrypt
	}
	log.Printf("re-encrypted %d credentials under k2", n)
}
