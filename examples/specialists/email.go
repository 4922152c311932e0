package main

// send_email: an Agent-Tool that needs the user's approval. Only the
// writer specialist has it (its SKILL.md lists it): when it calls it, the
// specialist is parked with its loop state in the pool, the coordinator's
// run ends waiting for approval, and the user's decision sends the email
// once and resumes the specialist where it stopped.

import (
	"context"
	"fmt"
	"sync"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
)

// SendEmailIn is send_email's schema.
type SendEmailIn struct {
	To      string `json:"to" jsonschema:"description=Recipient email address,format=email"`
	Subject string `json:"subject" jsonschema:"description=Subject line,minLength=1,maxLength=120"`
	Body    string `json:"body" jsonschema:"description=Plain-text body,minLength=1,maxLength=5000"`
}

// SendEmail sends from the user's mailbox once the user approves.
type SendEmail struct {
	From   string
	Outbox *Outbox
}

// Approval makes every email wait for the user's yes.
func (a SendEmail) Approval(in SendEmailIn) *approval.Request {
	return &approval.Request{
		ActionSummary: fmt.Sprintf("Send the email %q to %s", in.Subject, in.To),
		Details:       map[string]any{"from": a.From, "to": in.To, "subject": in.Subject, "body": in.Body},
	}
}

// Run sends the email.
func (a SendEmail) Run(ctx context.Context, in SendEmailIn) (agent.Reply, error) {
	a.Outbox.Send(Email{From: a.From, To: in.To, Subject: in.Subject, Body: in.Body})
	return agent.Reply{Text: "Email sent to " + in.To + "."}, nil
}

// Email is one message sent.
type Email struct{ From, To, Subject, Body string }

// Outbox is a fake mail server: it keeps what was sent.
type Outbox struct {
	mu   sync.Mutex
	sent []Email
}

// Send records m.
func (o *Outbox) Send(m Email) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, m)
}

// Sent returns the emails sent, in order.
func (o *Outbox) Sent() []Email {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Email(nil), o.sent...)
}
