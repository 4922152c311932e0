// Command assistant is valet's reference bot: a ReAct assistant with three
// tools — get_weather, web_search and calculator — that runs with no API
// key, no servers and no network.
//
// Run the demo conversation from the repository root:
//
//	go run ./examples/assistant
//
// It plays three user messages through agent.Orchestrator.Stream and prints
// each step: the model's text as it streams, every tool call as it starts
// and ends (two weather calls run in parallel; a calculator call with a
// wrong argument fails validation and the model corrects it), and the
// telemetry of each message (status, turns, tool calls, tokens, time).
//
// Chat with it:
//
//	go run ./examples/assistant -i
//	echo "what's the weather in Rome" | go run ./examples/assistant -i
//
// # The model
//
// Without OPENAI_API_KEY the model is an llmtest.Script, valet's mock
// client, answering from what each request holds (see script.go): the demo
// conversation, or in -i mode a simple model that picks a tool by keyword
// and summarises its result. With OPENAI_API_KEY set, the same program
// talks to a real model through openai.FromEnv; OPENAI_BASE_URL points it
// at any OpenAI-compatible server (Ollama, vLLM, LiteLLM, Azure...) and
// OPENAI_MODEL picks the model:
//
//	OPENAI_API_KEY=sk-... go run ./examples/assistant
//	OPENAI_API_KEY=unused OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.1 go run ./examples/assistant -i
//
// -offline keeps the scripted model even when a key is set, -tz sets the
// user's time zone (default Europe/Paris) and -v logs debug traces to
// stderr.
//
// # The files
//
//   - main.go wires the orchestrator and prints the stream of events;
//   - tools.go defines the tools, the way real ones are written: typed input
//     structs whose tags are the schema, ctx honoured, tool.ExecContextFrom
//     for tenant and logger;
//   - script.go is the offline model.
package main
