package agent

import (
	"errors"
	"fmt"
	"sort"

	"github.com/valetkit/valet/llm"
)

// ErrUnknownModel: a model name no client answers to (Config.Model when
// the orchestrator is built, Message.Model when a run starts), or a name
// with no Config.Models to ask.
var ErrUnknownModel = errors.New("agent: no client answers to the model name")

// ModelRouter maps a model name to the client that answers to it, so
// that a skill, a task or a message asks for "fast" or "smart" and the
// host decides what that means (Config.Models). Implementations must be
// safe for concurrent use. ModelMap is the map one.
type ModelRouter interface {
	// Client returns the client answering to name, or false.
	Client(name string) (llm.Client, bool)
}

// ModelMap is a ModelRouter over a fixed map of names to clients. A name
// mapped to nil answers false; NewOrchestrator refuses such a map.
type ModelMap map[string]llm.Client

// Client returns m[name].
func (m ModelMap) Client(name string) (llm.Client, bool) {
	c, ok := m[name]
	return c, ok && c != nil
}

// routeDefault checks Config.Models and Config.Model, and sets LLM from
// Model when LLM is nil.
func (cfg *Config) routeDefault() error {
	if mm, ok := cfg.Models.(ModelMap); ok {
		var nils []string
		for name, c := range mm {
			if c == nil {
				nils = append(nils, name)
			}
		}
		if len(nils) > 0 {
			sort.Strings(nils)
			return fmt.Errorf("%w: Config.Models maps %q to no client", ErrUnknownModel, nils)
		}
	}
	if cfg.Model == "" {
		return nil
	}
	if cfg.Models == nil {
		return fmt.Errorf("%w: Config.Model %q needs Config.Models", ErrUnknownModel, cfg.Model)
	}
	c, ok := cfg.Models.Client(cfg.Model)
	if !ok {
		return fmt.Errorf("%w: Config.Model %q", ErrUnknownModel, cfg.Model)
	}
	if cfg.LLM == nil {
		cfg.LLM = c
	}
	return nil
}

// route picks the run's client from Message.Model.
func (r *run) route() error {
	name := r.msg.Model
	if err := r.o.CheckModel(name); err != nil || name == "" {
		return err
	}
	r.llm, _ = r.o.cfg.Models.Client(name)
	return nil
}

// client is the run's model client.
func (r *run) client() llm.Client {
	if r.llm != nil {
		return r.llm
	}
	return r.o.llm
}

// CheckModel reports whether a run could use the model name (a task's,
// a skill's) before one does: nil for "" and for a name Config.Models
// answers, ErrUnknownModel otherwise.
func (o *Orchestrator) CheckModel(name string) error {
	if name == "" {
		return nil
	}
	if o.cfg.Models == nil {
		return fmt.Errorf("%w: %q (Config.Models is nil)", ErrUnknownModel, name)
	}
	if _, ok := o.cfg.Models.Client(name); !ok {
		return fmt.Errorf("%w: %q", ErrUnknownModel, name)
	}
	return nil
}
