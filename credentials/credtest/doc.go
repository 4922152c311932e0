// Package credtest is the conformance suite for implementations of
// credentials.Store, in the manner of testing/slogtest: a store's own
// tests call [Run] with a constructor, and every behaviour the credentials
// package documents is checked as a parallel subtest with a store of its
// own.
//
//	func TestStore(t *testing.T) {
//		credtest.Run(t, func(t *testing.T) credentials.Store {
//			schema := createSchema(t)                      // isolate this subtest
//			t.Cleanup(func() { dropSchema(schema) })       // and leave nothing behind
//			s, err := mystore.New(db, mystore.Config{KeyRing: ring, Schema: schema})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// Run checks saving, reading, listing (metadata only, sorted) and
// deleting; that "" and "primary" name one account; that two tenants never
// see each other's rows, whatever their names contain; that concurrent
// Saves of one credential leave exactly one intact value; that racing
// Updates lose no change (credentials.Updater: N increments give N, and
// the refresh token each one rotated survives); DeleteTenant
// (credentials.TenantDeleter); bad input (empty tenant or service, bad
// names, creds that are not a JSON object: an array, a string, a number,
// nil) fails with credentials.ErrInvalid and stores nothing; a done ctx
// changes nothing; and that the store credentials.ForTenant makes of it
// holds its tenant. Checks of optional interfaces the store lacks are
// skipped.
//
// # Stores that encrypt
//
// [RunEncrypted] adds the checks of encryption at rest. It needs to see
// behind the store, through a [Backing]: open stores with other key rings
// on the same rows, read the rows as they are at rest, and copy a row to
// other names:
//
//	credtest.RunEncrypted(t, func(t *testing.T) credtest.Backing {
//		return &myBacking{schema: createSchema(t)}
//	})
//
// It checks that the stored bytes hold no plaintext (it searches them for
// known secrets, also hex and base64 encoded); that each row records its
// key id and new rows use the primary key; that a row copied to another
// tenant, service or account (also "a"+"bc" to "ab"+"c") does not
// decrypt and fails with credentials.ErrDecrypt; that rotation keeps every
// row readable, leaves every row under the primary key, lets the old key
// go, keeps UpdatedAt, and serves readers meanwhile; that a row under a
// key id the ring lacks fails with credentials.ErrUnknownKey naming it;
// and that a key ring with the wrong material for a key id fails naming
// the key id and overwrites nothing — neither by Save, Update nor Rotate.
//
// No check prints a secret: failures name the credential, never its value.
package credtest
