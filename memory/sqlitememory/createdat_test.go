package sqlitememory_test

import (
	"errors"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/sqlitememory"
)

// TestCreatedAtOutOfRange: times are stored as INTEGER microseconds since
// 1970, which hold about ±292,000 years. An item's CreatedAt outside that
// range cannot be stored as given; it is refused with memory.ErrInvalid
// instead of wrapping around to another time (which reorders recall and
// reads back as something the caller never wrote), and nothing of the
// call is stored.
func TestCreatedAtOutOfRange(t *testing.T) {
	p := open(t, sqlitetest.Open(t, 1), sqlitememory.Config{})
	for _, at := range []time.Time{
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		ids, err := p.Remember(bg, "t", memory.Item{Text: "fine"}, memory.Item{Text: "dentist appointment", CreatedAt: at})
		if !errors.Is(err, memory.ErrInvalid) || ids != nil {
			t.Errorf("Remember with CreatedAt %v: %v, %v; want memory.ErrInvalid", at, ids, err)
		}
	}
	if got, err := p.Recall(bg, "t", "dentist appointment fine", memory.Budget{}); err != nil || len(got) != 0 {
		t.Errorf("after refused Remembers, Recall = %v, %v; want nothing", got, err)
	}
	// The widest times that fit are kept to the microsecond.
	for _, at := range []time.Time{
		time.UnixMicro(1<<63 - 1).UTC(),
		time.UnixMicro(-1 << 63).UTC(),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	} {
		if _, err := p.Remember(bg, "edge", memory.Item{Text: "edge " + at.String(), CreatedAt: at}); err != nil {
			t.Errorf("Remember with CreatedAt %v: %v", at, err)
			continue
		}
		got, err := p.Recall(bg, "edge", "edge "+at.String(), memory.Budget{MaxEntries: 1})
		if err != nil || len(got) != 1 || !got[0].CreatedAt.Equal(at) {
			t.Errorf("CreatedAt %v read back as %v (%v)", at, got, err)
		}
	}
}
