package credentials_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/valetkit/valet/credentials"
)

type token struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

func ExampleMemory() {
	ctx := context.Background()
	store := credentials.NewMemory()

	// "" is the primary account.
	err := store.Save(ctx, "alice", "google", "", token{AccessToken: "ya29.a0", RefreshToken: "1//0g"})
	if err != nil {
		fmt.Println(err)
		return
	}

	secret, err := store.Get(ctx, "alice", "google", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("secret:", secret) // prints REDACTED, never the token
	var tok token
	if err := secret.Decode(&tok); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("decoded:", tok.AccessToken != "")

	infos, _ := store.List(ctx, "alice", "") // metadata only
	for _, info := range infos {
		fmt.Println("listed:", info.Service, info.Account)
	}

	_, err = store.Get(ctx, "bob", "google", "")
	fmt.Println("bob:", errors.Is(err, credentials.ErrNotFound))

	err = store.Save(ctx, "alice", "github", "", []string{"not", "an", "object"})
	fmt.Println("array:", errors.Is(err, credentials.ErrInvalid))
	// Output:
	// secret: REDACTED
	// decoded: true
	// listed: google primary
	// bob: true
	// array: true
}

func ExampleMemory_Update() {
	ctx := context.Background()
	store := credentials.NewMemory()
	_ = store.Save(ctx, "alice", "google", "", token{AccessToken: "old", RefreshToken: "r1"})

	// A token refresh: Updates of one credential run one at a time, so a
	// rotated refresh token is never overwritten by a refresh that started
	// from the old one.
	err := store.Update(ctx, "alice", "google", "", func(_ context.Context, old credentials.Secret) (any, error) {
		var tok token
		if err := old.Decode(&tok); err != nil {
			return nil, err
		}
		// ... call the provider with tok.RefreshToken ...
		return token{AccessToken: "new", RefreshToken: "r2"}, nil
	})
	fmt.Println("update:", err)

	secret, _ := store.Get(ctx, "alice", "google", "")
	var tok token
	_ = secret.Decode(&tok)
	fmt.Println("refresh token rotated:", tok.RefreshToken == "r2")
	// Output:
	// update: <nil>
	// refresh token rotated: true
}

func ExampleNewKeyRing() {
	// Keys are 32 random bytes each, kept outside the database (a secret
	// manager, an environment variable decoded from base64).
	k1, k2 := make([]byte, 32), make([]byte, 32)
	rand.Read(k1)
	rand.Read(k2)

	// k2 is the primary: new writes use it; k1 still decrypts old rows.
	ring, err := credentials.NewKeyRing("k2", map[string][]byte{"k1": k1, "k2": k2})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ring) // key ids only, never key material

	// Seal and Open are what an encrypting store does with each row. The
	// tenant, service and account are the additional data.
	secret, _ := credentials.Encode(token{AccessToken: "ya29.a0"})
	sealed, _ := ring.Seal("alice", "google", "", secret)
	fmt.Println("sealed under", sealed.KeyID)
	_, err = ring.Open("alice", "google", "", sealed)
	fmt.Println("open:", err)
	_, err = ring.Open("bob", "google", "", sealed) // a row moved to another tenant
	fmt.Println("moved:", errors.Is(err, credentials.ErrDecrypt))

	_, err = credentials.NewKeyRing("k1", map[string][]byte{"k1": k1[:16]})
	fmt.Println(err)
	// Output:
	// credentials.KeyRing{primary: "k2", keys: ["k1" "k2"], material: REDACTED}
	// sealed under k2
	// open: <nil>
	// moved: true
	// credentials: invalid: key "k1" is 16 bytes; AES-256 needs exactly 32
}

func ExampleForTenant() {
	ctx := context.Background()
	store := credentials.NewMemory()
	_ = store.Save(ctx, "alice", "google", "", token{AccessToken: "alice's"})
	_ = store.Save(ctx, "bob", "google", "", token{AccessToken: "bob's"})

	// What a tool serving alice gets as tool.ExecContext.Credentials.
	tools := credentials.ForTenant(store, "alice")

	_, err := tools.Get(ctx, "alice", "google", "")
	fmt.Println("alice:", err)
	_, err = tools.Get(ctx, "bob", "google", "")
	fmt.Println("bob:", errors.Is(err, credentials.ErrNotFound))
	err = tools.Save(ctx, "bob", "google", "", token{AccessToken: "forged"})
	fmt.Println("save for bob:", errors.Is(err, credentials.ErrTenantMismatch))
	_, canRefresh := tools.(credentials.Updater)
	fmt.Println("can refresh tokens:", canRefresh)
	// Output:
	// alice: <nil>
	// bob: true
	// save for bob: true
	// can refresh tokens: true
}
