// Command webchat is the reference web chat over agent/agenthttp: one
// static page (plain HTML, CSS and JavaScript, embedded with go:embed, no
// build step) talking to the handler. It shows the user's message, the
// model's text streaming in, each tool call as a card from its start to
// its end with its duration (the calls of one turn side by side, as they
// run in parallel), approval cards with Approve / Edit / Cancel, a Stop
// button (…/cancel), and the tenant's scheduled tasks.
//
//	go run ./examples/webchat              # http://127.0.0.1:8080/?user=ann
//	go run ./examples/webchat -addr :9000
//	go run ./examples/webchat -smoke       # one scripted round trip over HTTP, then exit
//
// Offline it answers from a scripted model: ask for "the weather in Paris
// and Lyon, emailed to the team" and it checks both cities at once, then
// drafts the email and waits for your approval. With OPENAI_API_KEY set
// (OPENAI_BASE_URL and OPENAI_MODEL as llm/openai.FromEnv reads them) a
// real model answers instead.
//
// Authentication is the host's: here a stand-in, the page's ?user= name
// sent as the X-User header, so two browser tabs are two tenants that see
// nothing of each other. A real host derives the tenant from its session
// or a verified token in agenthttp.Config.Tenant.
package main
