// Package pooltest is the conformance suite for implementations of
// pool.Store and pool.Locker, in the manner of testing/slogtest: a store's
// own tests call [Run] with a constructor, and every behaviour the pool
// documents is checked as a parallel subtest.
//
//	func TestStore(t *testing.T) {
//		pooltest.Run(t, func(t *testing.T, maxPerTenant int, retention time.Duration) pool.Store {
//			prefix := "test:" + rand.Text() + ":"      // isolate this subtest
//			t.Cleanup(func() { deleteKeys(prefix) })   // and leave nothing behind
//			s, err := mystore.New(client, mystore.Config{Prefix: prefix, MaxPerTenant: maxPerTenant, Retention: retention})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
//	func TestLocker(t *testing.T) {
//		pooltest.RunLocker(t, func(t *testing.T) pool.Locker { return mystore.NewLocker(...) })
//	}
//
// The suite uses the real clock and sleeps for well under two seconds in
// all; it expects stores to keep times to at least the millisecond.
// [NewEntry] and [Diff] help a store's own extra tests.
package pooltest
