package trigger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// FuzzCron feeds arbitrary expressions to Check and Next: no panic, an
// error is ErrInvalid, and a valid schedule's next time is later.
func FuzzCron(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "0 9 29 2 *", "0 0 30 2 *", "*/15 1-3 * * MON-FRI", "TZ=Europe/Paris",
		"CRON_TZ= 0 * * * *", "@every 1h", "5-1/0 * * * *", "0 0 ? JAN,dec SUN", "1/99999999999999999999 * * * *",
	} {
		f.Add(seed, uint8(1), int64(1_790_000_000))
	}
	zones := []string{"", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia"}
	f.Fuzz(func(t *testing.T, expr string, zone uint8, unix int64) {
		s := trigger.Schedule{Cron: expr, Zone: zones[int(zone)%len(zones)]}
		err := s.Check()
		if err != nil {
			if !errors.Is(err, trigger.ErrInvalid) {
				t.Fatalf("Check(%q) = %v, not ErrInvalid", expr, err)
			}
			return
		}
		after := time.Unix(unix%(1<<36), 0) // years 1970 ± 2000
		next, ok := s.Next(after)
		if !ok || !next.After(after) {
			t.Fatalf("%v.Next(%s) = %s, %v", s, after, next, ok)
		}
	})
}
