package credentials_test

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/valetkit/valet/credentials"
)

type apiKey struct {
	Key string `json:"key"`
}

// The first things a bot's credentials need: a KeyRing, whose keys
// encrypt secrets at rest (credentials/pgstore.New(db,
// pgstore.Config{KeyRing: ring}) takes it), and a Store. NewMemory is the
// in-memory Store, for one process and for tests. A Secret never prints
// what it holds; only Decode reveals it.
func Example() {
	key := make([]byte, 32) // from a secret manager in production
	rand.Read(key)
	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ring)

	ctx := context.Background()
	store := credentials.NewMemory()
	if err := store.Save(ctx, "alice", "weather_api", "", apiKey{Key: "wk-123"}); err != nil {
		fmt.Println(err)
		return
	}
	secret, err := store.Get(ctx, "alice", "weather_api", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("printed: %v %+v %q\n", secret, secret, secret)
	var k apiKey
	_ = secret.Decode(&k)
	fmt.Println("decoded:", k.Key)
	// Output:
	// credentials.KeyRing{primary: "k1", keys: ["k1"], material: REDACTED}
	// printed: REDACTED REDACTED "REDACTED"
	// decoded: wk-123
}
