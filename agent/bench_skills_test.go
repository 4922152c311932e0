package agent_test

import (
	"testing"

	"github.com/valetkit/valet/agent"
)

// BenchmarkSkillsOffered measures skills (Config.Skills) configured but
// never used, on BenchmarkConversation/valet's workload (5 turns × 3
// parallel calls):
//
//	go test -run '^$' -bench BenchmarkSkillsOffered ./agent/
//
// Three sides in interleaved blocks of one run: "off" without sub-agents,
// "spawn" with spawn_agent offered, "skills" with spawn_agent and three
// skills (their index in the system prompt, the skill argument in
// spawn_agent's schema). x-time, x-allocs and x-bytes are skills / spawn;
// xoff- the same against off.
func BenchmarkSkillsOffered(b *testing.B) {
	model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
	cfg := agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()}
	off, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfg.SubAgents.Enabled = true
	spawn, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Skills = loadSkills(b, map[string]string{
		"weather/SKILL.md":  "---\nname: weather\ndescription: Forecasts for trips.\ntools: [get_weather]\n---\nGive three days.\n",
		"research/SKILL.md": "---\nname: research\ndescription: Finds and cites facts.\ntools: [web_search, spawn_agent]\n---\nCite sources.\n",
		"maths/SKILL.md":    "---\nname: maths\ndescription: Computes.\ntools: calculator\n---\nShow the working.\n",
	})
	skills, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
	t := interleave(b, 100,
		valetSide(b, "off", off, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
		valetSide(b, "spawn", spawn, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
		valetSide(b, "skills", skills, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
	)
	reportSide(b, "off-", t[0])
	reportSide(b, "spawn-", t[1])
	reportSide(b, "skills-", t[2])
	reportRatios(b, "x-time", "x-", t[2], t[1], true)
	reportRatios(b, "xoff-time", "xoff-", t[2], t[0], true)
}
