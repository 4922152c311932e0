// Package rotation is the walk that credentials' SQL stores (pgstore,
// sqlitestore) share for Rotate: batch after batch in key order,
// counting the rows re-encrypted and those that could not be decrypted,
// of which the first few are listed. It is for those packages only.
package rotation

import (
	"errors"
	"fmt"
)

// MaxListed is how many rows that could not be decrypted Rotate's error
// lists.
const MaxListed = 5

// Batch re-encrypts the rows after the key after, in key order, and
// returns how many it re-encrypted, the key of the last row it read,
// whether it read a full batch (so more may follow), the errors of the
// rows it could not decrypt, and the error that stopped it.
type Batch[K any] func(after K) (n int, last K, full bool, bad []error, err error)

// Failed counts the rows a Walk could not decrypt, with the first
// MaxListed of their errors.
type Failed struct {
	N      int
	Listed []error
}

// Err is nil when no row failed, and otherwise the error Rotate returns,
// its text starting with prefix ("pgstore: rotate"), saying how many rows
// were re-encrypted (total) and how many stay under their keys.
func (f Failed) Err(prefix string, total int) error {
	if f.N == 0 {
		return nil
	}
	more := ""
	if f.N > len(f.Listed) {
		more = fmt.Sprintf(" (the first %d listed)", len(f.Listed))
	}
	return fmt.Errorf("%s: re-encrypted %d rows; %d rows could not be decrypted and stay under their keys%s: %w", prefix, total, f.N, more, errors.Join(f.Listed...))
}

// Walk calls batch from the zero key until a batch is not full or
// fails, and returns the rows re-encrypted, those that could not be
// decrypted, and the error of the batch that failed.
func Walk[K any](batch Batch[K]) (total int, failed Failed, err error) {
	var after K
	for {
		n, last, full, bad, err := batch(after)
		total += n
		failed.N += len(bad)
		for _, e := range bad {
			if len(failed.Listed) < MaxListed {
				failed.Listed = append(failed.Listed, e)
			}
		}
		if err != nil || !full {
			return total, failed, err
		}
		after = last
	}
}
