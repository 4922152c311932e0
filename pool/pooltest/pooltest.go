package pooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/pool"
)

// NewStore makes an empty store for one subtest. maxPerTenant and
// retention are the store's cap and retention, 0 meaning the store's
// defaults. It isolates the store from every other one it makes (a key
// prefix, a schema) and removes what it leaves behind with t.Cleanup.
// Subtests run in parallel, so it is called concurrently.
type NewStore = func(t *testing.T, maxPerTenant int, retention time.Duration) pool.Store

// NewLocker makes a Locker for one subtest, isolated from every other one
// it makes, cleaning up with t.Cleanup. It is called concurrently.
type NewLocker = func(t *testing.T) pool.Locker

// timeSlack is how far a time read back may be from the one written:
// stores keep at least millisecond precision.
const timeSlack = time.Millisecond

// Run checks that the stores newStore makes behave as [pool.Store]
// documents. Each check is a parallel subtest with a store of its own.
// The whole suite sleeps for well under two seconds.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStore)
	}{
		{"RoundTrip", testRoundTrip},
		{"CreateSetsRevisionAndTimes", testCreateSets},
		{"InvalidEntry", testInvalid},
		{"Exists", testExists},
		{"TenantIsolation", testTenantIsolation},
		{"SeparatorsInKeys", testSeparators},
		{"List", testList},
		{"Update", testUpdate},
		{"UpdateRace", testUpdateRace},
		{"Take", testTake},
		{"TakeRace", testTakeRace},
		{"TakeRevision", testTakeRevision},
		{"TakeRevisionExpired", testTakeRevisionExpired},
		{"TakeRevisionRace", testTakeRevisionRace},
		{"TakeRevisionUpdateRace", testTakeRevisionUpdateRace},
		{"Delete", testDelete},
		{"TenantCap", testCap},
		{"ExpiredStaysReadable", testExpiredReadable},
		{"RetentionEnds", testRetentionEnds},
		{"Copies", testCopies},
		{"CancelledContext", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore)
		})
	}
}

// NewEntry returns a valid entry of tenantID with every field set, expiring
// in an hour. Tests of a Store may use it as a starting point.
func NewEntry(tenantID, id string) *pool.Entry {
	now := time.Now().Round(0)
	return &pool.Entry{
		ID:             id,
		AgentName:      "send_email",
		TenantID:       tenantID,
		ConversationID: "conv-" + id,
		Status:         pool.StatusWaitingForApproval,
		Paused:         true,
		SchemaVersion:  "sha256:0123abcd",
		Fields:         json.RawMessage(`{"to": "team@example.com", "subject": "Q3 <draft> & \"notes\"", "n": 2, "nested": {"x": [1, 2.5, null, true]}}`),
		Missing:        []string{"body"},
		Problems:       []string{"to: must be a valid email", "ünïcødé ✓"},
		State:          json.RawMessage(`{"step":2,"seen":["a","b"]}`),
		SubAgent:       json.RawMessage(`[{"v":1,"call_id":"sp_1","window":[{"role":"user","content":"T\u00e2che <x> & \"y\""}],"budget":{"max_tokens":1200}}]`),
		Approval: &approval.Request{
			ID:            id,
			AgentName:     "send_email",
			ActionSummary: "Send an email to team@example.com",
			Details: map[string]any{
				"to":    "team@example.com",
				"count": 3,
				"tags":  []any{"a", "b"},
				"extra": map[string]any{"cc": "boss@example.com"},
			},
			Options:           []string{"approve", "edit", "cancel"},
			AllowModification: true,
			TenantID:          tenantID,
			ConversationID:    "conv-" + id,
			Source:            approval.SourceTrigger,
			TaskID:            "task-7",
			CreatedAt:         now.Add(-time.Minute),
			ExpiresAt:         now.Add(time.Hour),
		},
		ToolCallID: "call_" + id,
		Source:     approval.SourceTrigger,
		TaskID:     "task-7",
		Task:       "weekly report",
		// A W3C traceparent, as agent keeps the span that parked the entry.
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Revision:    42, // Create must replace it with 1
		CreatedAt:   now.Add(-2 * time.Second),
		UpdatedAt:   now.Add(-time.Second),
		ExpiresAt:   now.Add(time.Hour),
	}
}

// simple returns a minimal valid entry expiring in an hour.
func simple(tenantID, id string) *pool.Entry {
	return &pool.Entry{
		ID:        id,
		AgentName: "agent",
		TenantID:  tenantID,
		Status:    pool.StatusWaitingForInput,
		ExpiresAt: time.Now().Add(time.Hour),
	}
}

// Diff lists the fields in which got differs from want: times compare
// within a millisecond, JSON and approval details by meaning (as decoded
// JSON), and nil and empty slices are equal.
func Diff(want, got *pool.Entry) []string {
	var d []string
	add := func(field string, w, g any) {
		d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w))
	}
	str := func(field, w, g string) {
		if w != g {
			add(field, fmt.Sprintf("%q", w), fmt.Sprintf("%q", g))
		}
	}
	tm := func(field string, w, g time.Time) {
		if diff := w.Sub(g); diff >= timeSlack || diff <= -timeSlack || w.IsZero() != g.IsZero() {
			add(field, w, g)
		}
	}
	js := func(field string, w, g []byte) {
		if !sameJSON(w, g) {
			add(field, string(w), string(g))
		}
	}
	strs := func(field string, w, g []string) {
		if len(w) != 0 || len(g) != 0 {
			if !slices.Equal(w, g) {
				add(field, w, g)
			}
		}
	}
	if want == nil || got == nil {
		if want != got {
			add("entry", want, got)
		}
		return d
	}
	str("ID", want.ID, got.ID)
	str("AgentName", want.AgentName, got.AgentName)
	str("TenantID", want.TenantID, got.TenantID)
	str("ConversationID", want.ConversationID, got.ConversationID)
	str("Status", string(want.Status), string(got.Status))
	if want.Paused != got.Paused {
		add("Paused", want.Paused, got.Paused)
	}
	str("SchemaVersion", want.SchemaVersion, got.SchemaVersion)
	js("Fields", want.Fields, got.Fields)
	strs("Missing", want.Missing, got.Missing)
	strs("Problems", want.Problems, got.Problems)
	js("State", want.State, got.State)
	js("SubAgent", want.SubAgent, got.SubAgent)
	str("ToolCallID", want.ToolCallID, got.ToolCallID)
	str("Source", want.Source, got.Source)
	str("TaskID", want.TaskID, got.TaskID)
	str("Task", want.Task, got.Task)
	str("TraceParent", want.TraceParent, got.TraceParent)
	if want.Revision != got.Revision {
		add("Revision", want.Revision, got.Revision)
	}
	tm("CreatedAt", want.CreatedAt, got.CreatedAt)
	tm("UpdatedAt", want.UpdatedAt, got.UpdatedAt)
	tm("ExpiresAt", want.ExpiresAt, got.ExpiresAt)

	wa, ga := want.Approval, got.Approval
	switch {
	case wa == nil && ga == nil:
	case wa == nil || ga == nil:
		add("Approval", wa, ga)
	default:
		str("Approval.ID", wa.ID, ga.ID)
		str("Approval.AgentName", wa.AgentName, ga.AgentName)
		str("Approval.ActionSummary", wa.ActionSummary, ga.ActionSummary)
		wd, _ := json.Marshal(wa.Details)
		gd, _ := json.Marshal(ga.Details)
		if len(wa.Details) != 0 || len(ga.Details) != 0 {
			js("Approval.Details", wd, gd)
		}
		strs("Approval.Options", wa.Options, ga.Options)
		if wa.AllowModification != ga.AllowModification {
			add("Approval.AllowModification", wa.AllowModification, ga.AllowModification)
		}
		str("Approval.TenantID", wa.TenantID, ga.TenantID)
		str("Approval.ConversationID", wa.ConversationID, ga.ConversationID)
		str("Approval.Source", wa.Source, ga.Source)
		str("Approval.TaskID", wa.TaskID, ga.TaskID)
		tm("Approval.CreatedAt", wa.CreatedAt, ga.CreatedAt)
		tm("Approval.ExpiresAt", wa.ExpiresAt, ga.ExpiresAt)
	}
	return d
}

// sameJSON reports whether a and b decode to the same value; two empty
// values are the same.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func mustSame(t *testing.T, what string, want, got *pool.Entry) {
	t.Helper()
	if d := Diff(want, got); len(d) > 0 {
		t.Errorf("%s differs from what was stored:", what)
		for _, line := range d {
			t.Errorf("  %s", line)
		}
	}
}

func mustCreate(t *testing.T, s pool.Store, e *pool.Entry) {
	t.Helper()
	if err := s.Create(context.Background(), e); err != nil {
		t.Fatalf("Create(%q/%q): %v", e.TenantID, e.ID, err)
	}
}

func mustGet(t *testing.T, s pool.Store, tenantID, id string) *pool.Entry {
	t.Helper()
	e, err := s.Get(context.Background(), tenantID, id)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", tenantID, id, err)
	}
	if e == nil {
		t.Fatalf("Get(%q, %q) returned a nil entry and no error", tenantID, id)
	}
	return e
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one matching %v", what, err, target)
	}
}

func wantGone(t *testing.T, s pool.Store, tenantID, id string) {
	t.Helper()
	e, err := s.Get(context.Background(), tenantID, id)
	if !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("Get(%q, %q) = %v, %v; want ErrNotFound", tenantID, id, e, err)
	}
}

func ids(entries []*pool.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.TenantID + "/" + e.ID
	}
	return out
}
