// Package agent is valet's ReAct loop: the [Orchestrator] takes a user's
// message, lets the model call tools — many at once — until it can answer,
// and returns the answer with the telemetry of everything it did.
//
// # Wiring
//
//	o, err := agent.NewOrchestrator(agent.Config{
//		LLM:          client,               // any llm.Client: llm/openai, llm/llmtest, ...
//		SystemPrompt: "You are Koi, a concise personal assistant.",
//		Tools:        []tool.Tool{weather, search},
//	})
//	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Text: "Weather in Paris?"})
//	fmt.Println(res.Response, res.Turns, res.Usage)
//
// Or stream the run, to show text as the model writes it and tool calls as
// they start and finish:
//
//	for ev, err := range o.Stream(ctx, msg) {
//		switch ev.Type {
//		case agent.EventMessageChunk:
//			fmt.Print(ev.Text)
//		case agent.EventExecutionEnd:
//			// ev.Result is the same Result HandleMessage returns; err is its error
//		}
//	}
//
// # One message, step by step
//
// The ShouldProcess hook may decline the message. Messages of the same
// (tenant, conversation) wait for each other; other conversations run in
// parallel. The model is sent a system prompt (the persona, the current time
// in the user's time zone, the list of tools), the conversation's history and
// the message (the PrepareContext hook may edit them). Then each turn:
//
//   - the history is trimmed if it is past LoopConfig.TrimThreshold of the
//     window (tool calls keep their results);
//   - the model is called; failures are handled by kind through one table:
//     rate limits and 5xx back off exponentially, honouring Retry-After, up to
//     LLMMaxRetries; a timeout is retried once; a context overflow trims, then
//     truncates every tool result, then keeps only the last messages, then
//     fails with ErrContextOverflow; an auth or bad-request error is returned
//     at once;
//   - no tool calls: that is the answer;
//   - otherwise every tool call runs concurrently (up to
//     LoopConfig.MaxParallelTools at once) with its own timeout. A
//     failure — bad arguments, an unknown tool, an error, a panic, a timeout —
//     becomes an error tool result the model reads and can recover from; it
//     never aborts the loop. Each result is cut to its share of the window.
//
// After LoopConfig.MaxTurns tool turns, one last call without tools asks for
// a final answer. The exchange is saved to the conversation's history and
// the PostProcess hook runs.
//
// # Invariants
//
// Every assistant tool call in what the model is sent has exactly one tool
// result after it, through trimming, overflow handling and cancellation. A
// cancelled ctx ends the run promptly (tools see it through their ctx) and
// leaves no goroutine behind; the Result then has StatusCancelled, and the
// completed turns are kept in the history. Tools must honour their ctx: a
// tool that ignores it keeps its message waiting until it returns, because
// the loop never abandons a running call. Arguments are summarised for
// telemetry with secret-looking fields masked.
//
// # History
//
// Until a memory provider is configured, each conversation's history lives
// in the orchestrator's memory: the newest LoopConfig.MaxHistoryMessages
// messages per (tenant, conversation), kept until the process ends or
// [Orchestrator.Forget] drops them. [Orchestrator.History] returns a copy.
package agent
