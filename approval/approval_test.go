package approval_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/valetkit/valet/approval"
)

func TestDecisionCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    approval.Decision
		ok   bool
	}{
		{"approve", approval.Decision{Action: approval.Approve}, true},
		{"approve with reason", approval.Decision{Action: approval.Approve, Reason: "fine"}, true},
		{"cancel", approval.Decision{Action: approval.Cancel, Reason: "changed my mind"}, true},
		{"edit with fields", approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`{"to":"me@example.com"}`)}, true},
		{"edit with empty object", approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`{}`)}, true},
		{"empty action", approval.Decision{}, false},
		{"unknown action", approval.Decision{Action: "maybe"}, false},
		{"upper case action", approval.Decision{Action: "APPROVE"}, false},
		{"edit without fields", approval.Decision{Action: approval.Edit}, false},
		{"edit with null", approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`null`)}, false},
		{"edit with array", approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`[1]`)}, false},
		{"edit with string", approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`"to"`)}, false},
		{"edit with broken JSON", approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`{"to":`)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.d.Check()
			if tc.ok && err != nil {
				t.Fatalf("Check() = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, approval.ErrInvalidDecision) {
				t.Fatalf("Check() = %v, want ErrInvalidDecision", err)
			}
		})
	}
}

func TestActionValid(t *testing.T) {
	for _, a := range []approval.Action{approval.Approve, approval.Edit, approval.Cancel} {
		if !a.Valid() {
			t.Errorf("%q.Valid() = false", a)
		}
	}
	for _, a := range []approval.Action{"", "yes", "Approve", "delete"} {
		if a.Valid() {
			t.Errorf("%q.Valid() = true", a)
		}
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	r := approval.Request{ExpiresAt: now}
	if r.Expired(now.Add(-time.Second)) || !r.Expired(now) || !r.Expired(now.Add(time.Second)) {
		t.Error("a request expires at ExpiresAt")
	}
	if (&approval.Request{}).Expired(now) {
		t.Error("a request without ExpiresAt never expires")
	}
}

func TestChoices(t *testing.T) {
	a, e, c := approval.Approve, approval.Edit, approval.Cancel
	for _, tc := range []struct {
		name    string
		options []string
		modify  bool
		want    []approval.Action
	}{
		{"default", nil, false, []approval.Action{a, c}},
		{"default editable", nil, true, []approval.Action{a, e, c}},
		{"options in their order", []string{"cancel", "edit", "approve"}, true, []approval.Action{c, e, a}},
		{"edit needs AllowModification", []string{"approve", "edit", "cancel"}, false, []approval.Action{a, c}},
		{"cancel is always offered", []string{"approve"}, false, []approval.Action{a, c}},
		{"unknown and repeated options dropped", []string{"approve", "Approve ", "snooze", "edit"}, true, []approval.Action{a, e, c}},
		{"only cancel", []string{"cancel"}, true, []approval.Action{c}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := approval.Request{Options: tc.options, AllowModification: tc.modify}
			if got := r.Choices(); !slices.Equal(got, tc.want) {
				t.Fatalf("Choices() = %v, want %v", got, tc.want)
			}
			for _, act := range []approval.Action{a, e, c, "nope"} {
				if got, want := r.Allows(act), slices.Contains(tc.want, act); got != want {
					t.Errorf("Allows(%q) = %v, want %v", act, got, want)
				}
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := approval.Fingerprint("send_email", "v1", json.RawMessage(`{"to":"a@x.com","subject":"Hi"}`))
	if len(base) != 32 {
		t.Fatalf("fingerprint %q is not 32 hex digits", base)
	}
	same := []json.RawMessage{
		json.RawMessage(`{"subject":"Hi","to":"a@x.com"}`),
		json.RawMessage(" {\n \"to\" : \"a@x.com\", \"subject\":\"Hi\"}\n"),
	}
	for _, args := range same {
		if got := approval.Fingerprint("send_email", "v1", args); got != base {
			t.Errorf("Fingerprint(%s) = %s, want %s (same arguments)", args, got, base)
		}
	}
	differ := []struct {
		agent, version string
		args           json.RawMessage
	}{
		{"send_email", "v1", json.RawMessage(`{"to":"b@x.com","subject":"Hi"}`)},
		{"send_email", "v1", json.RawMessage(`{"to":"a@x.com","subject":"Hi","cc":"c@x.com"}`)},
		{"send_email", "v2", json.RawMessage(`{"to":"a@x.com","subject":"Hi"}`)},
		{"send_mail", "v1", json.RawMessage(`{"to":"a@x.com","subject":"Hi"}`)},
		{"send_emailv", "1", json.RawMessage(`{"to":"a@x.com","subject":"Hi"}`)}, // the parts are length-prefixed
	}
	for _, d := range differ {
		if got := approval.Fingerprint(d.agent, d.version, d.args); got == base {
			t.Errorf("Fingerprint(%q, %q, %s) equals the original's", d.agent, d.version, d.args)
		}
	}
	if approval.Fingerprint("a", "v", json.RawMessage(`not json`)) == approval.Fingerprint("a", "v", json.RawMessage(`not json!`)) {
		t.Error("invalid JSON arguments are not hashed as they are")
	}
}
