package approval_test

import (
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/approval"
)

func TestPresent(t *testing.T) {
	exp := time.Date(2025, 6, 1, 17, 4, 5, 0, time.FixedZone("CEST", 2*3600))
	pending := []approval.Request{
		{
			ID: "r1", AgentName: "send_email", ActionSummary: "Send an email to team@example.com",
			Details: map[string]any{
				"to":      "team@example.com",
				"subject": "Weekly report",
				"body":    "Hi team,\nall green.\n",
			},
			AllowModification: true,
			ExpiresAt:         exp,
		},
		{
			ID: "r2", AgentName: "book_flight", ActionSummary: "Book flight\nLH 123 to Berlin",
			Details: map[string]any{"price": 129.5, "seats": []string{"12A"}, "refundable": false, "notes": nil},
			Options: []string{"approve", "edit", "cancel"},
		},
		{ID: "r3", AgentName: "pay_invoice"},
	}
	want := `1. Send an email to team@example.com
   body: Hi team,
         all green.
   subject: Weekly report
   to: team@example.com
   Reply: approve, edit or cancel (expires 2025-06-01T15:04:05Z)

2. Book flight LH 123 to Berlin
   notes: (none)
   price: 129.5
   refundable: false
   seats: ["12A"]
   Reply: approve or cancel

3. Run pay_invoice
   Reply: approve or cancel
`
	got := approval.Present(pending)
	if got != want {
		t.Fatalf("Present() =\n%s\nwant\n%s", got, want)
	}
	for range 20 { // map order must not leak into the text
		if again := approval.Present(pending); again != got {
			t.Fatalf("Present is not deterministic:\n%s\nvs\n%s", again, got)
		}
	}
	if strings.Contains(got, "r1") || strings.Contains(got, "r2") {
		t.Error("Present shows request IDs to the user")
	}
}

func TestPresentEmpty(t *testing.T) {
	if got := approval.Present(nil); got != "" {
		t.Fatalf("Present(nil) = %q, want empty", got)
	}
}

func TestPresentNumbersPastNine(t *testing.T) {
	pending := make([]approval.Request, 10)
	for i := range pending {
		pending[i] = approval.Request{ID: string(rune('a' + i)), ActionSummary: "Do it", Details: map[string]any{"k": "v"}}
	}
	lines := strings.Split(approval.Present(pending), "\n")
	var last []string
	for i, l := range lines {
		if strings.HasPrefix(l, "10. ") {
			last = lines[i:]
		}
	}
	if len(last) < 3 || last[1] != "    k: v" || last[2] != "    Reply: approve or cancel" {
		t.Fatalf("item 10 is not indented under its number: %q", last)
	}
}
