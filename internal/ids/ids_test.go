package ids_test

import (
	"strings"
	"testing"

	"github.com/valetkit/valet/internal/ids"
)

func TestCheck(t *testing.T) {
	for name, c := range map[string]struct {
		id string
		ok bool
	}{
		"empty":         {"", false},
		"short":         {"u1", true},
		"MaxLen bytes":  {strings.Repeat("x", ids.MaxLen), true},
		"one byte over": {strings.Repeat("x", ids.MaxLen+1), false},
		"multibyte fit": {strings.Repeat("é", ids.MaxLen/2), true},
		"bad UTF-8":     {"a\xffb", false},
		"NUL":           {"a\x00b", false},
	} {
		if err := ids.Check("tenant ID", c.id); (err == nil) != c.ok || ids.Valid(c.id) != c.ok {
			t.Errorf("%s: Check = %v, Valid = %v, want ok=%v", name, err, ids.Valid(c.id), c.ok)
		}
	}
}
