package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/valetkit/valet/agent/skill"
	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// Skills (Config.Skills): the coordinator's system prompt lists their
// index, and spawn_agent's skill argument starts a specialist whose
// prompt holds the skill's body and whose tools are exactly the skill's.

// spawnSkillArgs are spawn_agent's arguments when skills are configured;
// spawnCall reads every call's arguments as these.
type spawnSkillArgs struct {
	Task        string          `json:"task,omitempty" jsonschema:"description=The task for the sub-agent: what to do and what to answer with; required unless tasks is given"`
	Context     string          `json:"context,omitempty" jsonschema:"description=What the sub-agent needs to know: it sees nothing of this conversation"`
	Skill       string          `json:"skill,omitempty" jsonschema:"description=The name of a skill from the Skills list: the sub-agent runs as that skill's specialist; leave it out for a general worker"`
	BudgetShare float64         `json:"budget_share,omitempty" jsonschema:"description=Share (0 to 1) of what is left of this request's budget the sub-agent may use; default all of it,minimum=0,maximum=1"`
	Background  bool            `json:"background,omitempty" jsonschema:"description=Run the task in the background: the call returns at once and the result comes to this conversation as a new message when it is done"`
	Tasks       []spawnTaskArgs `json:"tasks,omitempty" jsonschema:"description=Instead of task: several tasks run in the background as a graph; a task starts when the tasks it depends_on completed and its context may refer to their results as [agent_result:<task id>]"`
}

// skillSpawnTool is spawn_agent with the skill argument.
func skillSpawnTool() tool.Tool {
	return tool.New(SpawnAgentTool,
		"Start a sub-agent on a self-contained task and get its answer; name a skill to start that skill's specialist. "+
			"It starts with a fresh context: give it everything it needs in task and context. Several spawns in one reply run at the same time.",
		func(context.Context, spawnSkillArgs) (string, error) {
			return "", errors.New("agent: spawn_agent runs only inside the orchestrator's loop")
		})
}

// hasSkills reports whether s holds a skill.
func hasSkills(s *skill.Set) bool { return s != nil && s.Index() != "" }

// checkSkills refuses Config.Skills the orchestrator cannot run as
// written: without sub-agents, or naming a tool or a model that does not
// exist. With Config.ToolSources, a tool not found here may come from a
// source: it is checked when a spawn starts the skill (childScope).
func (o *Orchestrator) checkSkills() error {
	s := o.cfg.Skills
	if !hasSkills(s) {
		return nil
	}
	if o.spawn == nil {
		return fmt.Errorf("%w: Config.Skills needs Config.SubAgents.Enabled: a skill runs as a sub-agent that spawn_agent starts", ErrInvalidConfig)
	}
	sources := len(o.cfg.ToolSources) > 0
	toolExists := func(name string) bool {
		_, ok := o.tools.Get(name) // plain tools, Agent-Tools, spawn_agent
		return ok || sources
	}
	modelExists := func(name string) bool { return o.CheckModel(name) == nil }
	if err := s.Check(toolExists, modelExists); err != nil {
		return fmt.Errorf("%w: Config.Skills: %w", ErrInvalidConfig, err)
	}
	return nil
}

// skillsIntro opens the coordinator's skills section.
const skillsIntro = "\n\nSkills: specialists you can delegate to. To use one, call spawn_agent with its name as the skill argument, " +
	"the task, and in context everything it needs; it has its own instructions and tools. The skills:\n"

// skillsPrompt is the coordinator's skills section: the index only, never
// a body; "" without skills.
func skillsPrompt(s *skill.Set) string {
	idx := s.Index()
	if idx == "" {
		return ""
	}
	return skillsIntro + strings.TrimSuffix(idx, "\n")
}

// childScope is what a sub-agent spawned by r at depth gets: with skill
// named, that skill's tools, prompt and model; without, r's tools (a
// sub-agent never has more than its spawner) and the worker prompt. A
// non-empty refusal says why nothing may start.
func (r *run) childScope(depth int, name string) (sub subRun, model, refusal string) {
	o := r.o
	sub.depth = depth
	sub.prompt = o.spawn.opts.WorkerPrompt
	if name == "" {
		sub.specs = r.childSpecs(depth, nil)
		if r.sub != nil {
			sub.reg = r.sub.reg
		}
		sub.tokens = toolTokens(o, sub.specs)
		return sub, "", ""
	}
	sk, ok := o.cfg.Skills.Get(name)
	if !ok {
		return sub, "", unknownSkill(o.cfg.Skills, name)
	}
	base := r.baseTools()
	for _, t := range sk.Tools {
		if _, ok := base.Get(t); !ok {
			return sub, "", fmt.Sprintf("spawn_agent: skill %q lists tool %q, which this request does not have; no sub-agent was started", sk.Name, textsafe.Line(t))
		}
	}
	sub.specs = r.childSpecs(depth, &sk)
	tools := make([]tool.Tool, 0, len(sub.specs))
	for _, sp := range sub.specs {
		t, _ := base.Get(sp.Name)
		tools = append(tools, t)
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil { // cannot happen: the run's registry held them
		return sub, "", "spawn_agent: " + maskText(err.Error())
	}
	sub.reg = reg
	sub.tokens = toolTokens(o, sub.specs)
	sub.skill = sk.Name
	if b := strings.TrimSpace(sk.Body); b != "" {
		sub.prompt += "\n\nInstructions of skill " + sk.Name + ":\n" + b
	}
	return sub, sk.Model, ""
}

// unknownSkill is the refusal of a spawn naming a skill there is none of.
func unknownSkill(s *skill.Set, name string) string {
	name = quotedName(name)
	all := s.All()
	if len(all) == 0 {
		return fmt.Sprintf("spawn_agent: unknown skill %q: no skills are configured; leave skill out; no sub-agent was started", name)
	}
	names := make([]string, len(all))
	for i, k := range all {
		names[i] = k.Name // Load allows lowercase letters, digits and hyphens only
	}
	return fmt.Sprintf("spawn_agent: unknown skill %q; the skills are: %s; no sub-agent was started", name, strings.Join(names, ", "))
}

// quotedName is a name the model wrote, on one line and cut to a
// skill name's longest (skill.MaxNameLen) plus a margin, for a result.
func quotedName(name string) string {
	name = textsafe.Line(name)
	const max = skill.MaxNameLen + 16
	if len(name) <= max {
		return name
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}

// scopeRefuses reports whether r, a sub-agent with a tool scope of its
// own (a specialist, or one spawned by it), was not given tool c.Name:
// then the call is an unknown tool's and runs nothing.
func (r *run) scopeRefuses(name string) (callOutcome, bool) {
	if r.sub == nil || r.sub.reg == nil || r.sub.offers(name) {
		return callOutcome{}, false
	}
	return callOutcome{result: tool.Result{
		Content: fmt.Sprintf("unknown tool %q. Available tools: %s", quotedName(name), specNames(r.sub.specs)),
		IsError: true,
	}}, true
}

// offers reports whether the sub-agent's tools include name.
func (s *subRun) offers(name string) bool {
	for _, sp := range s.specs {
		if sp.Name == name {
			return true
		}
	}
	return false
}

// specNames lists the names of specs, comma-separated ("none" for none).
func specNames(specs []llm.ToolSpec) string {
	if len(specs) == 0 {
		return "none"
	}
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	return strings.Join(names, ", ")
}

// baseTools is the registry of the run's whole tool set (the
// orchestrator's, or with ToolSources the run's), whatever a sub-agent's
// scope: where a skill's tools are taken from.
func (r *run) baseTools() *tool.Registry {
	if r.toolset != nil {
		return r.toolset.reg
	}
	return r.o.tools
}
