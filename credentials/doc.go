// Package credentials defines how valet reaches a tenant's secrets (OAuth
// tokens, API keys) on behalf of a tool: the [Store] interface, the [Secret]
// value that never prints its contents, the metadata [Info], the in-memory
// store [Memory], the [KeyRing] that encrypts secrets at rest, and
// [ForTenant], which binds a store to one tenant.
//
// # Stores
//
// A credential is named by a tenant, a service ("google", "github") and an
// account; the account "" means [PrimaryAccount], "primary". Its value is
// a JSON object the tool understands — a struct, a map, a json.RawMessage:
//
//	store := credentials.NewMemory() // one process; tests
//
//	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key}) // 32 bytes, kept outside the database
//	store, err := pgstore.New(db, pgstore.Config{KeyRing: ring})             // PostgreSQL, encrypted at rest
//
//	err = store.Save(ctx, "alice", "google", "", token) // "" is the primary account
//	secret, err := store.Get(ctx, "alice", "google", "")
//	infos, err := store.List(ctx, "alice", "")          // metadata only
//
// Tenant IDs, services and accounts are not secret: they are stored in
// the clear and appear in error messages. Only the value is secret.
//
// # Secrets
//
// Get returns a [Secret]. It prints as REDACTED with every fmt verb, in
// slog records and in JSON; only [Secret.Decode] reveals it. No error of
// this package or of its stores holds secret bytes or key material.
//
// # Tools
//
// A tool reads the store through its execution context. The orchestrator
// binds that store to the message's tenant with [ForTenant], so a tool
// that names another tenant finds nothing:
//
//	ec := tool.ExecContextFrom(ctx)
//	secret, err := ec.Credentials.Get(ctx, ec.TenantID, "gmail", "")
//	if errors.Is(err, credentials.ErrNotFound) { ... ask the user to connect ... }
//	var tok struct{ AccessToken string `json:"access_token"` }
//	err = secret.Decode(&tok)
//
// # Token refresh
//
// Two tool calls that find the same expired token must not both refresh
// it from the old refresh token: a provider that rotates refresh tokens
// would keep only one of the new ones. A store that implements [Updater]
// (both stores here do, and so does what ForTenant returns for them) runs
// Updates of one credential one at a time, with a revision check against
// concurrent Saves:
//
//	u, ok := store.(credentials.Updater)
//	err := u.Update(ctx, tenantID, "google", "", func(_ context.Context, old credentials.Secret) (any, error) {
//		var tok Token
//		if err := old.Decode(&tok); err != nil {
//			return nil, err
//		}
//		if time.Until(tok.Expiry) > time.Minute {
//			return old, nil // another call refreshed it while this one waited
//		}
//		return refresh(ctx, tok.RefreshToken) // nothing is written if it fails
//	})
//
// # Encryption at rest
//
// Stores that persist secrets (credentials/pgstore) encrypt each one with
// AES-256-GCM under a [KeyRing]. The tenant, service and account, each
// length-prefixed, are the additional data, so a row copied or moved to
// another tenant, service or account does not decrypt. Each row records
// the id of its key; new writes use the ring's primary key, and every key
// in the ring still decrypts. To rotate:
//
//  1. Add a new key and make it primary: NewKeyRing("k2", {"k1": old, "k2": new}).
//  2. Deploy it everywhere; new writes now use k2, rows under k1 still read.
//  3. Call Rotate (credentials.Rotator) to re-encrypt the rows under k1.
//  4. Drop k1 from the ring.
//
// A row under a key id the ring lacks fails with [ErrUnknownKey], a key id
// whose material differs from the one that wrote it with [ErrWrongKey]
// (before anything is written), a row that was moved or altered with
// [ErrDecrypt]; each names the key id. [Memory] does not encrypt: it keeps
// nothing beyond the process.
//
// # Errors
//
// Methods return [ErrNotFound], [ErrInvalid], [ErrTenantMismatch],
// [ErrConflict], [ErrUnknownKey], [ErrWrongKey] and [ErrDecrypt] wrapped
// with context; check them with errors.Is.
//
// # Writing a store
//
// Call [Normalize] (or [CheckList]) first, [Encode] to turn creds into a
// Secret, [KeyRing.Seal] and [KeyRing.Open] to encrypt, and run
// credentials/credtest from the store's tests: credtest.Run for every
// store, credtest.RunEncrypted for stores that encrypt.
package credentials
